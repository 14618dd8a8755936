//! The nvcc command for one device architecture, shared by the build scripts of the kernels
//! crate and of the vendored supraseal-c2 (`#[path]` modules of both): with
//! `SPLITPROVER_CUDA_ARCH=N` (e.g. `90`) the CUDA code is compiled as native code for that one
//! architecture instead of sppark's portable set of five. CI, which has no GPU, only checks that
//! the CUDA code compiles and links. `sppark::build::ccmd` adds its targets unconditionally and
//! `cc::Build` cannot drop a flag, so this repeats the rest of what it sets: its defines, its
//! warning flag and the include paths of blst and sppark.

/// `Some(nvcc)` for the one architecture `SPLITPROVER_CUDA_ARCH` names, `None` when it is unset
/// or empty (the caller then takes `sppark::build::ccmd()`).
pub fn one_arch() -> Option<cc::Build> {
    println!("cargo:rerun-if-env-changed=SPLITPROVER_CUDA_ARCH");
    let arch = std::env::var("SPLITPROVER_CUDA_ARCH")
        .ok()
        .filter(|a| !a.is_empty())?;
    assert!(
        arch.chars().all(|c| c.is_ascii_digit()),
        "SPLITPROVER_CUDA_ARCH is a compute capability such as 90, not `{arch}`"
    );
    let mut nvcc = cc::Build::new();
    // `cc` turns a profile's debug info (the release profile has line tables) into nvcc's `-G`:
    // device code without optimisation. The kernels are built optimised in every profile.
    nvcc.cuda(true)
        .debug(false)
        .flag("-gencode")
        .flag(format!("arch=compute_{arch},code=sm_{arch}"))
        .flag("-Xcompiler")
        .flag("-Wno-unused-function")
        .define("TAKE_RESPONSIBILITY_FOR_ERROR_MESSAGE", None);
    for dep in ["DEP_BLST_C_SRC", "DEP_SPPARK_ROOT"] {
        if let Some(dir) = std::env::var_os(dep) {
            nvcc.include(dir);
        }
    }
    Some(nvcc)
}

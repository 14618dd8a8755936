use std::env;

fn main() {
    let mut nvcc = nvcc();
    nvcc.define("FEATURE_BLS12_381", None);
    apply_blst_flags(&mut nvcc);
    nvcc.file("cuda/groth16_cuda.cu").compile("groth16_cuda");

    println!("cargo:rerun-if-changed=cuda");
    println!("cargo:rerun-if-env-changed=CXXFLAGS");
}

fn apply_blst_flags(nvcc: &mut cc::Build) {
    let target_arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap();

    match (cfg!(feature = "portable"), cfg!(feature = "force-adx")) {
        (true, false) => {
            nvcc.define("__BLST_PORTABLE__", None);
        }
        (false, true) => {
            if target_arch.eq("x86_64") {
                nvcc.define("__ADX__", None);
            }
        }
        (false, false) =>
        {
            #[cfg(target_arch = "x86_64")]
            if target_arch.eq("x86_64") && std::is_x86_feature_detected!("adx") {
                nvcc.define("__ADX__", None);
            }
        }
        (true, true) => panic!("Cannot compile with both `portable` and `force-adx` features"),
    }
}

// splitprover patch 4: `SPLITPROVER_CUDA_ARCH=N` builds device code for that one architecture
// only (CI checks that the CUDA build compiles and links, without a GPU); otherwise sppark's
// portable set, as upstream.
fn nvcc() -> cc::Build {
    println!("cargo:rerun-if-env-changed=SPLITPROVER_CUDA_ARCH");
    match env::var("SPLITPROVER_CUDA_ARCH") {
        Ok(arch) if !arch.is_empty() => {
            assert!(
                arch.chars().all(|c| c.is_ascii_digit()),
                "SPLITPROVER_CUDA_ARCH is a compute capability such as 90, not `{arch}`"
            );
            let mut nvcc = cc::Build::new();
            nvcc.cuda(true)
                .flag("-gencode")
                .flag(format!("arch=compute_{arch},code=sm_{arch}"))
                .flag("-Xcompiler")
                .flag("-Wno-unused-function")
                .define("TAKE_RESPONSIBILITY_FOR_ERROR_MESSAGE", None);
            for dep in ["DEP_BLST_C_SRC", "DEP_SPPARK_ROOT"] {
                if let Some(dir) = env::var_os(dep) {
                    nvcc.include(dir);
                }
            }
            nvcc
        }
        _ => sppark::build::ccmd(),
    }
}

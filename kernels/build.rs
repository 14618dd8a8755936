//! Builds our own CUDA prover (`cuda/gpu_prover.cu`) with the `cuda` feature: nvcc through
//! sppark's build helper (its include paths, blst's, and its portable set of targets), plus
//! native code for Hopper (sm_90), where the H200s run.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "cuda")]
    cuda::build();
}

#[cfg(feature = "cuda")]
mod cuda {
    pub fn build() {
        println!("cargo:rerun-if-changed=cuda");
        println!("cargo:rerun-if-env-changed=CXXFLAGS");
        let mut nvcc = nvcc();
        nvcc.define("FEATURE_BLS12_381", None);
        // blst's assembly needs ADX where the host has it (as supraseal-c2 and blst decide it).
        #[cfg(target_arch = "x86_64")]
        if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64")
            && std::is_x86_feature_detected!("adx")
        {
            nvcc.define("__ADX__", None);
        }
        nvcc.file("cuda/gpu_prover.cu")
            .file("cuda/gpu_paramgen.cu")
            .compile("splitprover_gpu");
    }

    /// nvcc with sppark's portable set of targets plus native Hopper code (sm_90), or, with
    /// `SPLITPROVER_CUDA_ARCH=N` (e.g. `90`), native code for that one architecture only: CI,
    /// which has no GPU, checks that the CUDA code compiles and links once instead of five times
    /// (`vendor/supraseal-c2/build.rs` reads the same variable). sppark's include paths and
    /// defines are the same either way.
    fn nvcc() -> cc::Build {
        println!("cargo:rerun-if-env-changed=SPLITPROVER_CUDA_ARCH");
        match std::env::var("SPLITPROVER_CUDA_ARCH") {
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
                    if let Some(dir) = std::env::var_os(dep) {
                        nvcc.include(dir);
                    }
                }
                nvcc
            }
            _ => {
                let mut nvcc = sppark::build::ccmd();
                nvcc.flag("-gencode").flag("arch=compute_90,code=sm_90");
                nvcc
            }
        }
    }
}

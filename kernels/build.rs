//! Builds our own CUDA prover (`cuda/gpu_prover.cu`) with the `cuda` feature: nvcc through
//! sppark's build helper (its include paths, blst's, and its portable set of targets), plus
//! native code for Hopper (sm_90), where the H200s run.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "cuda")]
    cuda::build();
}

#[cfg(feature = "cuda")]
#[path = "cuda/nvcc.rs"]
mod nvcc;

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

    /// nvcc with sppark's portable set of targets plus native Hopper code (sm_90), or native
    /// code for the one architecture `SPLITPROVER_CUDA_ARCH` names (`cuda/nvcc.rs`).
    fn nvcc() -> cc::Build {
        super::nvcc::one_arch().unwrap_or_else(|| {
            let mut nvcc = sppark::build::ccmd();
            nvcc.flag("-gencode").flag("arch=compute_90,code=sm_90");
            nvcc.debug(false);
            nvcc
        })
    }
}

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
// portable set, as upstream. The command is the kernels crate's, so both builds agree.
#[path = "../../kernels/cuda/nvcc.rs"]
mod nvcc;

fn nvcc() -> cc::Build {
    let mut nvcc = nvcc::one_arch().unwrap_or_else(sppark::build::ccmd);
    // cc turns a profile's debug info into nvcc's `-G`, device code without optimisation
    nvcc.debug(false);
    nvcc
}

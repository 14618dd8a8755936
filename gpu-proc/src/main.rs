//! gpu-proc as its own binary (the launcher normally runs `splitprover gpu-proc`, the same code):
//! reads its configuration from the environment and inherited descriptors.

fn main() -> std::process::ExitCode {
    match gpu_proc::run_from_env() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

//! The `splitprover` binary: everything lives in the library.

fn main() -> std::process::ExitCode {
    launcher::cli::main()
}

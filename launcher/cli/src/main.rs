//! The `splitprover` binary: everything lives in the library.

fn main() -> std::process::ExitCode {
    splitprover::run()
}

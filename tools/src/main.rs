//! The `rampart` binary: a thin entry point over the CLI in this crate's library.

fn main() -> std::process::ExitCode {
    rampart::cli_main()
}

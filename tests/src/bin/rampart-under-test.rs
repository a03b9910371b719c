//! The rampart binary, rebuilt inside the test crate so integration tests get CARGO_BIN_EXE_rampart-under-test.
fn main() -> std::process::ExitCode {
    rampart::cli_main()
}

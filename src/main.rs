use clap::Parser;

fn main() -> std::process::ExitCode {
    gpufleet::cli::run(gpufleet::cli::Cli::parse())
}

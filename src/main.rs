fn main() -> std::process::ExitCode {
    // An empty variable means unset, as with KUBECONFIG (clap would see an empty value).
    for var in [
        "GPUFLEET_CONFIG",
        "GPUFLEET_INVENTORY",
        "GPUFLEET_KNOWN_HOSTS",
        "GPUFLEET_STATE_DIR",
        "GPUFLEET_SSH_CONFIG",
    ] {
        if std::env::var_os(var).is_some_and(|v| v.is_empty()) {
            // SAFETY: single-threaded here; nothing else reads the environment yet.
            unsafe { std::env::remove_var(var) };
        }
    }
    gpufleet::cli::main()
}

/// mimalloc instead of the C library's allocator: a scan allocates and frees many short-lived
/// buffers per node (SSH packets, the probe's output, its parsed sections) from 2 worker
/// threads; glibc's malloc spent ≈ 18 % of a 1,000-node scan's CPU in them (bench/README.md,
/// "What bounds each figure").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // No transparent huge pages: mimalloc asks for them (MADV_HUGEPAGE), and a scan's many
    // small per-session buffers then fault in and zero 2 MiB at a time: 24 MB more peak RSS at
    // 10,000 nodes for no CPU gain (bench/README.md). Best effort: an old kernel says EINVAL.
    let _ = nix::sys::prctl::set_thp_disable(true);
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

//! Log setup: `tracing` to stderr, filter from `SPLITPROVER_LOG` (default `info`).

use tracing_subscriber::EnvFilter;

/// Installs the subscriber. Children log without timestamps' colour codes; the launcher prefixes
/// their lines with the role and pid.
pub fn init(child: bool) {
    let filter = EnvFilter::try_from_env(launcher::env::SPLITPROVER_LOG)
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let _ = if child {
        builder.without_time().try_init()
    } else {
        builder.try_init()
    };
}

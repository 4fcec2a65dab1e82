//! The signals that ask this process to stop: SIGINT (Ctrl-C) and SIGTERM
//! (`kill`, `docker stop`, a CI runner's timeout). Both must take the same
//! path, the one that removes the run's containers and keeps what was
//! measured; a process that dies on SIGTERM's default action leaves its
//! server running on the cores the next run measures on.

/// Resolves when SIGINT or SIGTERM arrives; says which, for the message.
pub async fn stop_requested() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = tokio::signal::ctrl_c() => "interrupted (Ctrl-C)",
                _ = term.recv() => "terminated (SIGTERM)",
            },
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                "interrupted (Ctrl-C)"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "interrupted (Ctrl-C)"
    }
}

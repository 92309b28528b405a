//! Test support shared by the integration suite: a scripted model server speaking HTTP/1.1 +
//! SSE on 127.0.0.1, a file server for download tests, builders for provider-format SSE
//! bodies, and temporary directories.

pub mod agent;
pub mod file_server;
pub mod llm;
pub mod model_server;
pub mod sse;
pub mod tempdir;

pub use file_server::{FileServer, Framing, Resource};
pub use model_server::{RecordedRequest, Reply, ScriptedServer};
pub use tempdir::TempDir;

/// Whether process `pid` has stopped running (gone, or a zombie awaiting its reaper), waiting
/// up to 3 s for it (the harness escalates SIGTERM to SIGKILL after 1 s).
pub async fn process_gone(pid: i32) -> bool {
    for _ in 0..60 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state is the first field after the parenthesized command name.
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next());
        if matches!(state, None | Some('Z') | Some('X')) {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    false
}

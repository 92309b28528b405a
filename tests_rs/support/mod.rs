//! Test support shared by the integration suite: a scripted model server speaking HTTP/1.1 +
//! SSE on 127.0.0.1, builders for provider-format SSE bodies, and temporary directories.

pub mod llm;
pub mod model_server;
pub mod sse;
pub mod tempdir;

pub use model_server::{RecordedRequest, Reply, ScriptedServer};
pub use tempdir::TempDir;

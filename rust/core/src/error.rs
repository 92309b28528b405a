//! The crate's top-level error: what building agents and sessions can fail with. Errors the
//! model should read are never raised: they become tool outputs (see `environment`).

use std::path::PathBuf;

use crate::config::ConfigError;
use crate::llm::LlmError;
use crate::trace::TraceError;

/// Errors of the session layer; every message names what failed and where.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A configuration file is missing, unreadable or invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A file-system operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was attempted (`create`, `read`, ...).
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// An explicit workspace does not exist.
    #[error("workspace {0} does not exist or is not a directory")]
    Workspace(PathBuf),
    /// The model client could not be built.
    #[error(transparent)]
    Model(#[from] LlmError),
    /// A trace could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A session id that has no trace.
    #[error("session {0} not found in this agent's traces")]
    SessionNotFound(String),
    /// A trace that cannot be resumed.
    #[error("cannot resume session {session_id}: {reason}")]
    Resume {
        /// The session.
        session_id: String,
        /// Why.
        reason: String,
    },
    /// The session was disposed.
    #[error("session {0} has been disposed")]
    Disposed(String),
    /// A run's task ended abnormally (a panic inside the loop).
    #[error("session {session_id}: the run failed unexpectedly: {message}")]
    RunFailed {
        /// The session.
        session_id: String,
        /// The panic message.
        message: String,
    },
    /// A run's input holds something other than complete model messages.
    #[error(
        "invalid run input: message {index} is {what}; a run takes complete model messages (user text, images, tool outputs)"
    )]
    InvalidInput {
        /// 0-based position of the offending message.
        index: usize,
        /// What it is instead.
        what: String,
    },
    /// Called outside a tokio runtime.
    #[error("no async runtime is running: {0}")]
    NoRuntime(String),
}

impl HarnessError {
    /// An I/O error with its action and path.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        HarnessError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

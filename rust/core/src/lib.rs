//! penguin-harness-core: the whole engine of penguin-harness, with no Python in it.
//!
//! A language model works in a workspace through six built-in tools; every tool call passes
//! one approval decision; everything that happens is an [`protocol::OmniMessage`], streamed to
//! the caller and written to a JSONL trace.
//!
//! Layers, from the wire inwards: [`llm`] (streaming provider clients) → engine (the turn loop)
//! → [`environment`] (tool execution and close-out) → [`tools`] (the tools themselves).
//! [`protocol`] is the shared vocabulary; [`config`] reads the agent and project files.

pub mod approval;
pub mod config;
pub mod engine;
pub mod environment;
pub mod error;
pub mod llm;
pub mod protocol;
pub mod session;
pub mod tools;
pub mod trace;

/// The crate version (also the Python package version).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub use error::HarnessError;
pub use session::{Agent, RunHandle, Session, SessionOptions};

//! Model clients (SPEC §6): one streaming adapter per wire protocol behind [`ModelClient`].
//!
//! Data flow: the engine owns the conversation context and hands the whole request (system
//! prompt, complete messages, tools, thinking level, output cap) to [`ModelClient::stream`].
//! The client maps it to the provider's JSON, streams the SSE response through an
//! incremental parser and pushes OmniMessages (partials, then each complete message as soon as
//! it is complete) into `out`. It never raises and never retries: every ending, including
//! user abort, is an [`LlmOutcome`] for the engine's reconnect policy to judge.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::protocol::{OmniMessage, StopReason, TokenCounts, ToolSpec};

/// How much the model should reason before answering.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    /// No reasoning.
    None,
    /// Brief reasoning.
    Low,
    /// The default.
    #[default]
    Medium,
    /// Extended reasoning.
    High,
    /// More than high.
    Xhigh,
    /// The provider's maximum.
    Max,
}

impl ThinkingLevel {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::None => "none",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::Xhigh => "xhigh",
            ThinkingLevel::Max => "max",
        }
    }
}

impl std::str::FromStr for ThinkingLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(ThinkingLevel::None),
            "low" => Ok(ThinkingLevel::Low),
            "medium" => Ok(ThinkingLevel::Medium),
            "high" => Ok(ThinkingLevel::High),
            "xhigh" => Ok(ThinkingLevel::Xhigh),
            "max" => Ok(ThinkingLevel::Max),
            other => Err(format!(
                "unknown thinking level \"{other}\" (expected none, low, medium, high, xhigh or max)"
            )),
        }
    }
}

/// One model request, fully assembled by the engine.
#[derive(Clone, Debug)]
pub struct ModelRequest<'a> {
    /// The substituted system prompt.
    pub system_prompt: &'a str,
    /// The whole context: complete model messages in order, the new input last.
    pub messages: &'a [OmniMessage],
    /// Tools offered; an empty slice means the request carries no `tools` field at all.
    pub tools: &'a [ToolSpec],
    /// Thinking level; `None` = not sent.
    pub thinking: Option<ThinkingLevel>,
    /// Output token cap; `None` = not sent.
    pub max_tokens: Option<u64>,
}

/// How one request ended.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmOutcome {
    /// `completed`, `aborted`, `timeout`, `malformed`, `auth` or `failed`.
    pub status: StopReason,
    /// What went wrong, for non-completed outcomes.
    pub error_message: Option<String>,
    /// A `failed` outcome that no retry can fix (e.g. HTTP 400 invalid request).
    pub permanent: bool,
    /// Token usage of the request; only on `completed`.
    pub usage: Option<TokenCounts>,
}

impl LlmOutcome {
    /// A completed request with its usage.
    pub fn completed(usage: Option<TokenCounts>) -> Self {
        LlmOutcome {
            status: StopReason::Completed,
            error_message: None,
            permanent: false,
            usage,
        }
    }

    /// A non-completed request.
    pub fn error(status: StopReason, message: impl Into<String>) -> Self {
        LlmOutcome {
            status,
            error_message: Some(message.into()),
            permanent: false,
            usage: None,
        }
    }
}

/// A streaming model client. Implementations are stateless per request and cheap to share.
#[async_trait]
pub trait ModelClient: Send + Sync {
    /// Streams one request; see the module docs. `out` is bounded: a slow consumer slows the
    /// client, and time spent waiting on `out` does not count toward the idle timeout.
    async fn stream(
        &self,
        request: ModelRequest<'_>,
        cancel: CancellationToken,
        out: &mpsc::Sender<OmniMessage>,
    ) -> LlmOutcome;
}

/// Default idle timeout of a streaming request (reset on every received chunk).
pub const DEFAULT_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// How clients are built.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// No bytes for this long ends the request with `timeout`.
    pub idle_timeout: std::time::Duration,
    /// A shared HTTP client (connection pool); `None` builds one.
    pub http: Option<reqwest::Client>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            http: None,
        }
    }
}

/// Errors building a client.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Http(String),
    /// The configured client type has no implementation in this build.
    #[error("client type {0} is not available")]
    Unsupported(&'static str),
}

/// Builds the streaming client for a configured model.
pub fn build_client(
    entry: &crate::config::ModelEntry,
    opts: ClientOptions,
) -> Result<std::sync::Arc<dyn ModelClient>, LlmError> {
    let _ = opts;
    Err(LlmError::Unsupported(entry.client_type.as_str()))
}

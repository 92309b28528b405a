//! Model clients (SPEC §6): one streaming adapter per wire protocol behind [`ModelClient`].
//!
//! Data flow: the engine owns the conversation context and hands the whole request (system
//! prompt, complete messages, tools, thinking level, output cap) to [`ModelClient::stream`].
//! The client maps it to the provider's JSON, streams the SSE response through an
//! incremental parser and pushes OmniMessages (partials, then each complete message as soon as
//! it is complete) into `out`. It never raises and never retries: every ending, including
//! user abort, is an [`LlmOutcome`] for the engine's reconnect policy to judge.
//!
//! Modules: [`sse`] (incremental event-stream parser), [`driver`] (HTTP, idle timeout, cancel,
//! close-out), [`segments`] (deltas → partials + complete messages), [`history`] (context →
//! turns, pairing repair), [`classify`] (outcome taxonomy, key redaction), and one module per
//! wire protocol: [`openai`] (Chat Completions) and [`anthropic`] (Messages).
//! [`build_client`] picks the protocol from a [`ModelEntry`].

pub mod anthropic;
pub mod classify;
pub mod driver;
pub mod history;
pub mod openai;
pub mod segments;
pub mod sse;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::{ClientType, ModelEntry};
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

/// Default longest silence from the model before a request ends as `timeout` (SPEC §6
/// `model.timeoutMs`, 120 s).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_millis(120_000);

/// How [`build_client`] builds a client.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Longest silence tolerated while waiting for the response or the next bytes of the
    /// stream; reset on every read. Time spent waiting for the consumer does not count.
    pub idle_timeout: Duration,
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

/// Why a client cannot be built. Messages never contain the API key.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The base URL does not parse or is not http(s).
    #[error("invalid base URL \"{url}\" for model {provider}/{model_id}: {reason}")]
    InvalidBaseUrl {
        /// The URL as configured.
        url: String,
        /// Provider half of the model reference.
        provider: String,
        /// Model half of the model reference.
        model_id: String,
        /// What is wrong.
        reason: String,
    },
    /// The key holds characters an HTTP header cannot carry.
    #[error(
        "the API key of model {provider}/{model_id} contains characters that cannot be sent in an HTTP header"
    )]
    InvalidApiKey {
        /// Provider half of the model reference.
        provider: String,
        /// Model half of the model reference.
        model_id: String,
    },
    /// The HTTP client could not be created (TLS setup).
    #[error("could not create the HTTP client: {0}")]
    HttpClient(String),
}

/// Installs the `ring` TLS provider for rustls once per process (reqwest is built without a
/// provider of its own). Another provider already installed is fine.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err means a provider is already installed, which is all we need.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A new HTTP client suitable for streaming (no overall timeout; the idle timeout is the
/// clients' own).
pub fn new_http_client() -> Result<reqwest::Client, LlmError> {
    install_crypto_provider();
    reqwest::Client::builder()
        .build()
        .map_err(|e| LlmError::HttpClient(e.to_string()))
}

/// A fresh tool-call id for a provider that sent none (`call_<16 hex>`).
pub fn new_tool_call_id() -> String {
    format!("call_{:016x}", rand::random::<u64>())
}

/// The client for a configured model: Chat Completions or Messages by `client_type`, with the
/// entry's (or the environment's) key and base URL.
pub fn build_client(
    entry: &ModelEntry,
    opts: ClientOptions,
) -> Result<Arc<dyn ModelClient>, LlmError> {
    let raw_url = entry.resolved_base_url();
    let bad_url = |reason: String| LlmError::InvalidBaseUrl {
        url: raw_url.clone(),
        provider: entry.provider.clone(),
        model_id: entry.model_id.clone(),
        reason,
    };
    let url = reqwest::Url::parse(raw_url.trim()).map_err(|e| bad_url(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad_url(format!(
            "the scheme must be http or https, not \"{}\"",
            url.scheme()
        )));
    }
    let api_key = entry.resolved_api_key();
    if let Some(key) = &api_key
        && reqwest::header::HeaderValue::from_str(&format!("Bearer {key}")).is_err()
    {
        return Err(LlmError::InvalidApiKey {
            provider: entry.provider.clone(),
            model_id: entry.model_id.clone(),
        });
    }
    let http = match opts.http {
        Some(h) => h,
        None => new_http_client()?,
    };
    Ok(match entry.client_type {
        ClientType::OpenAiChat => Arc::new(openai::OpenAiChatClient::new(
            http,
            &url,
            entry.model_id.clone(),
            api_key,
            entry.vision,
            opts.idle_timeout,
        )),
        ClientType::AnthropicMessages => Arc::new(anthropic::AnthropicClient::new(
            http,
            &url,
            entry.model_id.clone(),
            api_key,
            entry.vision,
            opts.idle_timeout,
        )),
    })
}

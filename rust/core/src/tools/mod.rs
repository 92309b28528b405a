//! The tool contract (SPEC §3): what a built-in tool implements, what it gets to work with, and
//! the registry that turns configured names into tool instances.
//!
//! A tool only streams output deltas (and, for tools that host child sessions, origin-tagged
//! messages to pass through) into its [`ToolOutput`], then returns a [`ToolResult`] or a
//! [`ToolError`]. Framing, truncation, timeouts, stop-reason priority and the final
//! `tool_call_output` belong to the Environment (`crate::environment`), never to the tool.

pub mod image;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::approval::Approver;
use crate::config::ToolDefinitionConfig;
use crate::protocol::{OmniMessage, StopReason};

pub mod exec;
pub mod subagent;

/// What a tool streams while it runs.
#[derive(Debug)]
pub enum ToolEmission {
    /// A piece of model-visible output text.
    Delta(String),
    /// A message from a nested session (carries `origin`); passed through untouched.
    Forward(OmniMessage),
}

/// The tool's output channel. Sending never fails from the tool's point of view: once the
/// Environment stops listening, emissions are dropped.
#[derive(Clone, Debug)]
pub struct ToolOutput {
    tx: mpsc::Sender<ToolEmission>,
}

impl ToolOutput {
    /// Wraps a sender (the Environment creates these).
    pub fn new(tx: mpsc::Sender<ToolEmission>) -> Self {
        ToolOutput { tx }
    }

    /// Streams one piece of output text. Empty strings are skipped.
    pub async fn delta(&self, text: impl Into<String>) {
        let text = text.into();
        if !text.is_empty() {
            let _ = self.tx.send(ToolEmission::Delta(text)).await;
        }
    }

    /// Passes a nested session's message through (it must carry `origin`).
    pub async fn forward(&self, msg: OmniMessage) {
        let _ = self.tx.send(ToolEmission::Forward(msg)).await;
    }
}

/// Everything a tool call gets besides its arguments.
#[derive(Clone)]
pub struct ToolContext {
    /// Absolute workspace path.
    pub workspace_dir: PathBuf,
    /// The call being executed.
    pub tool_call_id: String,
    /// Fires on user abort or on the tool's timeout; tools stop promptly when it fires.
    pub cancel: CancellationToken,
    /// The run's approver, for tools that host child sessions (approval inheritance).
    pub approver: Option<Arc<dyn Approver>>,
    /// Where output goes.
    pub output: ToolOutput,
}

/// How a tool says it ended (lowest priority in the close-out).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolResult {
    /// Self-reported stop reason; `None` = completed.
    pub stop_reason: Option<StopReason>,
    /// Terminal marker appended outside the truncation window (e.g. `[exit code: 1]`).
    pub note: Option<String>,
    /// Images as data URLs, appended after the text.
    pub images: Option<Vec<String>>,
}

impl ToolResult {
    /// Completed without note.
    pub fn completed() -> Self {
        ToolResult::default()
    }

    /// Completed with a note.
    pub fn completed_with_note(note: impl Into<String>) -> Self {
        ToolResult {
            stop_reason: Some(StopReason::Completed),
            note: Some(note.into()),
            images: None,
        }
    }

    /// Failed with a note (the model reads the note).
    pub fn failed(note: impl Into<String>) -> Self {
        ToolResult {
            stop_reason: Some(StopReason::Failed),
            note: Some(note.into()),
            images: None,
        }
    }

    /// Aborted (the Environment adds the interruption note).
    pub fn aborted() -> Self {
        ToolResult {
            stop_reason: Some(StopReason::Aborted),
            note: None,
            images: None,
        }
    }
}

/// A tool failure the tool did not turn into a result itself; the model reads
/// `[tool error] <message>`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// What went wrong, with context.
    pub message: String,
}

impl ToolError {
    /// Builds an error.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
        }
    }
}

/// Parsed, schema-checked arguments.
pub type ToolArgs = Map<String, Value>;

/// A built-in tool.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The tool's configuration (name, schema, limits); the single source of truth for what the
    /// model sees.
    fn definition(&self) -> &ToolDefinitionConfig;

    /// The model-visible text for a missing required argument. Tools with their own wording
    /// (e.g. `run_subagent`) override it.
    fn missing_argument_text(&self, field: &str) -> String {
        format!(
            "Missing required argument \"{field}\" for {}.",
            self.definition().name
        )
    }

    /// Runs one call. `args` already passed the definition's JSON Schema.
    async fn execute(&self, args: ToolArgs, ctx: ToolContext) -> Result<ToolResult, ToolError>;
}

/// Shortest yield a call may ask for (SPEC §3 yield clamp): shorter waits only add round trips.
pub const MIN_YIELD_MS: f64 = 250.0;
/// Margin kept between a yield and the tool's timeout (SPEC §3), so the call reports before the
/// Environment's timeout fires.
pub const TIMEOUT_MARGIN_MS: f64 = 1_000.0;
/// Longest yield when the tool's timeout is off: keeps deadline arithmetic finite (30 days).
pub const MAX_YIELD_MS: f64 = 30.0 * 24.0 * 3_600_000.0;

/// The yield clamp of SPEC §3, shared by the command and subagent tools: a finite number, else
/// `default`; at least [`MIN_YIELD_MS`]; when the tool's `timeout_ms` is on, at most
/// `max(timeout_ms − 1000, 250)`.
pub fn clamp_yield(raw: Option<&Value>, default: f64, timeout_ms: i64) -> Duration {
    let mut ms = raw
        .and_then(Value::as_f64)
        .filter(|v| v.is_finite())
        .unwrap_or(default)
        .max(MIN_YIELD_MS);
    if timeout_ms > 0 {
        ms = ms.min((timeout_ms as f64 - TIMEOUT_MARGIN_MS).max(MIN_YIELD_MS));
    }
    Duration::from_secs_f64(ms.min(MAX_YIELD_MS) / 1_000.0)
}

/// Shared facilities tools are built with (one set per session).
#[derive(Clone)]
pub struct ToolServices {
    /// The session's command sessions, shared by `exec_command` and `input_command`.
    pub commands: Arc<exec::CommandSessionManager>,
    /// HTTP client for downloads (image URLs); see `image::default_http_client`.
    pub http: reqwest::Client,
    /// The project's `vision_model`, which `describe_image` asks; `None` = not configured.
    pub vision: Option<image::VisionModel>,
    /// The session's subagents, shared by `run_subagent` and `input_subagent`; `None` where
    /// no session hosts the tools (they then explain that they are unavailable).
    pub subagents: Option<Arc<subagent::SubagentManager>>,
}

impl Default for ToolServices {
    /// Fresh command sessions, the process's HTTP client (built on first use, installing the
    /// rustls crypto provider), no vision model and no subagents.
    fn default() -> Self {
        ToolServices {
            commands: Arc::default(),
            http: image::default_http_client(),
            vision: None,
            subagents: None,
        }
    }
}

impl ToolServices {
    /// These services with the session's subagent manager.
    pub fn with_subagents(mut self, manager: Arc<subagent::SubagentManager>) -> Self {
        self.subagents = Some(manager);
        self
    }
}

/// Builds a tool from its definition and the session's services.
pub type ToolFactory = fn(ToolDefinitionConfig, &ToolServices) -> Arc<dyn Tool>;

/// The factory for a built-in tool name, or `None` for names this build does not know
/// (such config entries are skipped: neither offered nor executable).
pub fn builtin_factory(name: &str) -> Option<ToolFactory> {
    match name {
        "exec_command" => Some(exec::exec_command_factory),
        "input_command" => Some(exec::input_command_factory),
        "read_image" => Some(image::read_image::factory as ToolFactory),
        "describe_image" => Some(image::describe_image::factory as ToolFactory),
        subagent::RUN_SUBAGENT => Some(subagent::run_subagent_factory),
        subagent::INPUT_SUBAGENT => Some(subagent::input_subagent_factory),
        _ => None,
    }
}

//! `describe_image` (SPEC §3 and §6 "Vision", r, 90000 ms, offered to text-only models): the
//! project's vision model looks at the image and the session model reads its answer.
//!
//! Data flow: `source` → [`load_image`] → one request through [`VisionModel::client`] (no
//! tools, thinking `none`, at most [`VISION_MAX_TOKENS`] output tokens, at most
//! [`VISION_REQUEST_TIMEOUT`]) whose messages are the prompt and the image as a data URL. The
//! output starts with `<mime>, <size> — described by <model_id>:\n`; every `partial_text`
//! delta of the answer is forwarded as a tool delta the moment it arrives. Nothing else from
//! the request (thinking, usage, events) leaves this tool. The tool's cancel token cancels
//! the request and drops it, so an abort or the tool timeout ends it at once.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;

use super::VisionModel;
use super::source::{ImageError, load_image};
use crate::config::ToolDefinitionConfig;
use crate::llm::{LlmOutcome, ModelRequest, ThinkingLevel};
use crate::protocol::{
    EventType, ModelPayload, OmniMessage, Role, StopReason, user_image_url, user_text,
};
use crate::tools::{Tool, ToolArgs, ToolContext, ToolError, ToolResult, ToolServices};

/// The question asked when the call gives no (or a blank) `prompt`.
pub const DEFAULT_PROMPT: &str = "Describe this image in detail: what it shows, how it is laid \
     out, and any visible text, numbers, labels or user-interface elements, transcribed exactly.";

/// Output-token cap of the vision request (SPEC §3): room for a thorough description while
/// keeping the one-off request cheap and its answer well inside the tool's output cap.
pub const VISION_MAX_TOKENS: u64 = 2_048;

/// Time limit of the vision request (SPEC §3); leaves 30 s of the tool's default 90 s for
/// loading the image.
pub const VISION_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Messages buffered between the vision client and this tool; small, so a fast client waits
/// for the forwarding instead of growing memory.
const VISION_CHANNEL_CAPACITY: usize = 64;

/// The failure text when the project has no `vision_model`.
pub const NO_VISION_MODEL_NOTE: &str = "No vision model is configured for this project, and the \
     current model does not accept images. Ask the user to configure a `vision_model` \
     (provider and model_id) in the project config (.project_config.toml) so describe_image \
     can work.";

/// Appended when the vision model completed without any text.
pub const NO_TEXT_NOTE: &str = "[vision model returned no text]";

/// The `describe_image` tool.
pub struct DescribeImage {
    definition: ToolDefinitionConfig,
    http: reqwest::Client,
    vision: Option<VisionModel>,
}

impl DescribeImage {
    /// Builds the tool; `vision = None` makes every call fail with [`NO_VISION_MODEL_NOTE`].
    pub fn new(
        definition: ToolDefinitionConfig,
        http: reqwest::Client,
        vision: Option<VisionModel>,
    ) -> Self {
        DescribeImage {
            definition,
            http,
            vision,
        }
    }
}

/// The registry factory (`builtin_factory("describe_image")`).
pub fn factory(definition: ToolDefinitionConfig, services: &ToolServices) -> Arc<dyn Tool> {
    Arc::new(DescribeImage::new(
        definition,
        services.http.clone(),
        services.vision.clone(),
    ))
}

/// How the vision request ended, from this tool's point of view.
enum Answer {
    /// The client returned this outcome.
    Finished(LlmOutcome),
    /// [`VISION_REQUEST_TIMEOUT`] passed first.
    TimedOut,
    /// The tool's cancel token fired.
    Cancelled,
}

#[async_trait]
impl Tool for DescribeImage {
    fn definition(&self) -> &ToolDefinitionConfig {
        &self.definition
    }

    async fn execute(&self, args: ToolArgs, ctx: ToolContext) -> Result<ToolResult, ToolError> {
        let Some(source) = super::source_argument(&args) else {
            return Ok(ToolResult::failed(self.missing_argument_text("source")));
        };
        let Some(vision) = &self.vision else {
            return Ok(ToolResult::failed(NO_VISION_MODEL_NOTE));
        };
        let image = match load_image(source, &ctx.workspace_dir, &self.http, &ctx.cancel).await {
            Ok(image) => image,
            Err(ImageError::Aborted) => return Ok(ToolResult::aborted()),
            Err(err) => return Ok(ToolResult::failed(err.to_string())),
        };
        let prompt = args
            .get("prompt")
            .and_then(|v| v.as_str())
            .filter(|p| !p.trim().is_empty())
            .unwrap_or(DEFAULT_PROMPT);
        let summary = image.summary();
        let messages = [user_text(prompt), user_image_url(image.data_url())];
        drop(image);

        ctx.output
            .delta(format!("{summary} — described by {}:\n", vision.model_id))
            .await;
        let request = ModelRequest {
            system_prompt: "",
            messages: &messages,
            tools: &[],
            thinking: Some(ThinkingLevel::None),
            max_tokens: Some(VISION_MAX_TOKENS),
        };
        let (answer, streamed) = ask(vision, request, &ctx).await;

        let (status, message) = match answer {
            Answer::Cancelled => return Ok(ToolResult::aborted()),
            _ if ctx.cancel.is_cancelled() => return Ok(ToolResult::aborted()),
            Answer::Finished(outcome) if outcome.status == StopReason::Completed => {
                if !streamed {
                    ctx.output.delta(NO_TEXT_NOTE).await;
                }
                return Ok(ToolResult::completed());
            }
            Answer::Finished(outcome) => (outcome.status, outcome.error_message),
            Answer::TimedOut => (
                StopReason::Timeout,
                Some(format!(
                    "no complete answer within {} ms",
                    VISION_REQUEST_TIMEOUT.as_millis()
                )),
            ),
        };
        let detail = message
            .filter(|m| !m.is_empty())
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        ctx.output
            .delta(format!(
                "{}Vision model ({}) request {status}{detail}",
                if streamed { "\n" } else { "" },
                vision.model_id
            ))
            .await;
        Ok(ToolResult {
            stop_reason: Some(StopReason::Failed),
            ..ToolResult::default()
        })
    }
}

/// Runs the vision request, forwarding answer text as it arrives. Returns how it ended and
/// whether any text was forwarded.
async fn ask(vision: &VisionModel, request: ModelRequest<'_>, ctx: &ToolContext) -> (Answer, bool) {
    let cancel = ctx.cancel.child_token();
    let (tx, mut rx) = mpsc::channel::<OmniMessage>(VISION_CHANNEL_CAPACITY);
    let mut text = TextForwarder::default();
    let answer = {
        let request_fut = vision.client.stream(request, cancel.clone(), &tx);
        tokio::pin!(request_fut);
        let deadline = tokio::time::sleep(VISION_REQUEST_TIMEOUT);
        tokio::pin!(deadline);
        let answer = loop {
            tokio::select! {
                biased;
                _ = ctx.cancel.cancelled() => break Answer::Cancelled,
                Some(msg) = rx.recv() => text.forward(&msg, ctx).await,
                outcome = &mut request_fut => break Answer::Finished(outcome),
                _ = &mut deadline => break Answer::TimedOut,
            }
        };
        // Cancelling the token and then dropping the future (end of this block) ends the
        // request whether or not the client watches its token.
        if !matches!(answer, Answer::Finished(_)) {
            cancel.cancel();
        }
        answer
    };
    if let Answer::Finished(_) = answer {
        // What the client pushed right before returning is still queued.
        while let Ok(msg) = rx.try_recv() {
            text.forward(&msg, ctx).await;
        }
    }
    (answer, text.streamed)
}

/// Forwards the answer's text: `partial_text` deltas as they come; a complete assistant text
/// only when the client streamed no partials at all.
#[derive(Default)]
struct TextForwarder {
    saw_partials: bool,
    streamed: bool,
}

impl TextForwarder {
    async fn forward(&mut self, msg: &OmniMessage, ctx: &ToolContext) {
        let text = match msg.model() {
            Some(ModelPayload::PartialText(p)) => {
                self.saw_partials = true;
                if p.event_type != EventType::Delta {
                    return;
                }
                &p.text
            }
            Some(ModelPayload::Text(p)) if p.role == Role::Assistant && !self.saw_partials => {
                &p.text
            }
            _ => return,
        };
        if !text.is_empty() {
            self.streamed = true;
            ctx.output.delta(text.clone()).await;
        }
    }
}

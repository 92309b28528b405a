//! Anthropic Messages over SSE (`POST <base_url>/v1/messages`, `stream: true`).
//!
//! Request side: the system prompt is the `system` field; the context is grouped into turns
//! ([`super::history`]) and rendered as strictly alternating user/assistant messages (same-role
//! neighbours merged). Assistant turns carry `text`, `thinking` (replayed with the signature
//! kept in the thinking message's fidelity), `redacted_thinking` and `tool_use` blocks; user
//! turns start with their `tool_result` blocks (tool images inside them), then text and
//! images. Thinking without a signature (e.g. from another provider) cannot be verified by
//! the API and is left out.
//!
//! Response side: [`MessagesDecoder`] follows content blocks. Text, thinking and `tool_use`
//! blocks become segments; server-side blocks (`server_tool_use`, `*_tool_result`, …) run on
//! the provider and are ignored, never turned into local tool calls. A block's segment is
//! closed when the next block starts or when `message_delta` tells how the message ended, so
//! a response cut at `max_tokens` marks its last segment `failed` (one event later than
//! `content_block_stop`, which arrives before the stop reason). Usage is `message_start`'s,
//! overlaid field by field by `message_delta`'s.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::classify::{self, ProviderError};
use super::driver::{self, Decoder, RunContext, Step};
use super::history::{
    self, AssistantItem, Turn, UserItem, attached_image_line, is_web_url, parse_data_url,
    strip_id_suffix,
};
use super::segments::{SegmentKind, Segments};
use super::sse::SseEvent;
use super::{LlmOutcome, ModelClient, ModelRequest, ThinkingLevel, new_tool_call_id};
use crate::protocol::{OmniMessage, StopReason, TokenCounts};

/// The API version header value.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Fidelity key of a thinking message: the block's signature.
pub const SIGNATURE_KEY: &str = "signature";

/// Fidelity key of a redacted thinking block: its opaque `data`.
pub const REDACTED_DATA_KEY: &str = "redacted_data";

/// Output cap sent when the engine gives none: the API requires `max_tokens`, and 8192 is
/// accepted by every Claude model since 3.5.
pub const DEFAULT_MAX_TOKENS: u64 = 8_192;

/// The API's smallest thinking budget (tokens).
pub const MIN_THINKING_BUDGET: u64 = 1_024;

/// Output tokens kept free for the answer when the thinking budget is clamped under
/// `max_tokens` (the API requires budget < max_tokens).
pub const ANSWER_RESERVE_TOKENS: u64 = 1_024;

/// Thinking budget per level (tokens) before clamping: doubling steps from the API minimum
/// region up to the budgets documented for long extended thinking.
pub fn thinking_budget_for(level: ThinkingLevel) -> Option<u64> {
    match level {
        ThinkingLevel::None => None,
        ThinkingLevel::Low => Some(2_048),
        ThinkingLevel::Medium => Some(8_192),
        ThinkingLevel::High => Some(16_384),
        ThinkingLevel::Xhigh => Some(32_768),
        ThinkingLevel::Max => Some(65_536),
    }
}

/// The budget actually sent: the level's budget clamped to leave
/// [`ANSWER_RESERVE_TOKENS`] under `max_tokens`; `None` when that leaves less than
/// [`MIN_THINKING_BUDGET`] (thinking is then not requested).
pub fn thinking_budget(level: ThinkingLevel, max_tokens: u64) -> Option<u64> {
    let budget = thinking_budget_for(level)?.min(max_tokens.saturating_sub(ANSWER_RESERVE_TOKENS));
    (budget >= MIN_THINKING_BUDGET).then_some(budget)
}

/// A Messages client for one model; see the module docs.
pub struct AnthropicClient {
    http: reqwest::Client,
    endpoint: String,
    model_id: String,
    api_key: Option<String>,
    vision: bool,
    idle_timeout: Duration,
}

impl std::fmt::Debug for AnthropicClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicClient")
            .field("endpoint", &self.endpoint)
            .field("model_id", &self.model_id)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("vision", &self.vision)
            .finish()
    }
}

impl AnthropicClient {
    /// A client for `model_id` at `base_url` (the host, e.g. `https://api.anthropic.com`).
    pub fn new(
        http: reqwest::Client,
        base_url: &reqwest::Url,
        model_id: impl Into<String>,
        api_key: Option<String>,
        vision: bool,
        idle_timeout: Duration,
    ) -> Self {
        AnthropicClient {
            http,
            endpoint: format!("{}/v1/messages", base_url.as_str().trim_end_matches('/')),
            model_id: model_id.into(),
            api_key,
            vision,
            idle_timeout,
        }
    }

    /// The URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The JSON body of a request.
    pub fn request_body(&self, request: &ModelRequest<'_>) -> Value {
        let max_tokens = request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model_id));
        body.insert("max_tokens".into(), json!(max_tokens));
        if !request.system_prompt.is_empty() {
            body.insert("system".into(), json!(request.system_prompt));
        }
        body.insert(
            "messages".into(),
            Value::Array(messages_json(request.messages, self.vision)),
        );
        body.insert("stream".into(), json!(true));
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "description": t.description,
                        "input_schema": t.parameters.clone()
                            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                    })
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(budget) = request
            .thinking
            .and_then(|level| thinking_budget(level, max_tokens))
        {
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
        Value::Object(body)
    }
}

fn image_block(url: &str, vision: bool) -> Value {
    if vision {
        if let Some((mime, data)) = parse_data_url(url) {
            return json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}});
        }
        if is_web_url(url) {
            return json!({"type": "image", "source": {"type": "url", "url": url}});
        }
    }
    // No vision, or a path the API cannot fetch: the model reads where the image is.
    json!({"type": "text", "text": attached_image_line(url)})
}

/// The `messages` array; see the module docs.
pub fn messages_json(messages: &[OmniMessage], vision: bool) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for turn in history::group_turns(messages) {
        let (role, blocks) = match turn {
            Turn::Assistant(items) => ("assistant", assistant_blocks(&items)),
            Turn::User { results, items } => {
                let mut blocks = Vec::new();
                for r in &results {
                    let content = if r.images.is_empty() {
                        json!(r.output)
                    } else {
                        let mut parts = Vec::new();
                        if !r.output.is_empty() {
                            parts.push(json!({"type": "text", "text": r.output}));
                        }
                        parts.extend(r.images.iter().map(|u| image_block(u, vision)));
                        Value::Array(parts)
                    };
                    let mut block = json!({
                        "type": "tool_result",
                        "tool_use_id": strip_id_suffix(r.tool_call_id),
                        "content": content,
                    });
                    if r.stop_reason != StopReason::Completed {
                        block["is_error"] = json!(true);
                    }
                    blocks.push(block);
                }
                for item in items {
                    match item {
                        UserItem::Text(t) if t.is_empty() => {}
                        UserItem::Text(t) => blocks.push(json!({"type": "text", "text": t})),
                        UserItem::Image(u) => blocks.push(image_block(&u, vision)),
                    }
                }
                ("user", blocks)
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => {
                // Merged user content must still lead with its tool results.
                last_blocks.extend(blocks);
                last_blocks
                    .sort_by_key(|b| b.get("type").and_then(Value::as_str) != Some("tool_result"));
            }
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

fn assistant_blocks(items: &[AssistantItem<'_>]) -> Vec<Value> {
    let mut blocks = Vec::new();
    for item in items {
        match item {
            AssistantItem::Text(p) if p.text.is_empty() => {}
            AssistantItem::Text(p) => blocks.push(json!({"type": "text", "text": p.text})),
            AssistantItem::Thinking(p) => {
                let fidelity = p.fidelity.as_ref();
                let field = |k: &str| fidelity.and_then(|f| f.get(k)).and_then(Value::as_str);
                if let Some(data) = field(REDACTED_DATA_KEY) {
                    blocks.push(json!({"type": "redacted_thinking", "data": data}));
                } else if let Some(signature) = field(SIGNATURE_KEY) {
                    blocks.push(json!({
                        "type": "thinking",
                        "thinking": p.thinking,
                        "signature": signature,
                    }));
                }
            }
            AssistantItem::ToolCall(p) => {
                // `input` must be an object; arguments that are not one (a failed call the
                // tool already answered with an error) go back as an empty object.
                let input = serde_json::from_str::<Value>(&p.arguments)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({}));
                blocks.push(json!({
                    "type": "tool_use",
                    "id": strip_id_suffix(&p.tool_call_id),
                    "name": p.name,
                    "input": input,
                }));
            }
        }
    }
    blocks
}

/// Usage → [`TokenCounts`]: `cache_read_input_tokens` are cached input; `input_tokens` +
/// `cache_creation_input_tokens` are uncached input; `output_tokens` is the output.
pub fn usage_counts(usage: &Map<String, Value>) -> Option<TokenCounts> {
    if usage.is_empty() {
        return None;
    }
    let num = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
    Some(TokenCounts::new(
        num("cache_read_input_tokens"),
        num("input_tokens") + num("cache_creation_input_tokens"),
        num("output_tokens"),
    ))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Text,
    Thinking,
    ToolUse,
    /// A server-side block (or one this client does not know): ignored.
    Ignored,
}

/// Decodes a Messages stream; see the module docs.
#[derive(Debug, Default)]
pub struct MessagesDecoder {
    current: Option<(u64, Block)>,
    /// Arguments to use when a `tool_use` block streams no `input_json_delta`.
    tool_input_fallback: String,
    /// A block ended; its segment stays open until the next block or the stop reason.
    deferred_close: bool,
    usage: Map<String, Value>,
    stop_reason: Option<String>,
    saw_event: bool,
}

fn overlay(usage: &mut Map<String, Value>, update: Option<&Value>) {
    if let Some(Value::Object(map)) = update {
        for (k, v) in map {
            if !v.is_null() {
                usage.insert(k.clone(), v.clone());
            }
        }
    }
}

fn stop_failure(reason: &str) -> Option<&'static str> {
    match reason {
        "max_tokens" => Some(
            "the response was cut off at the output token limit (stop_reason \"max_tokens\"); raise max_tokens or ask for a shorter answer",
        ),
        "model_context_window_exceeded" => Some(
            "the conversation no longer fits the model's context window (stop_reason \"model_context_window_exceeded\")",
        ),
        _ => None,
    }
}

impl MessagesDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    fn settle(&mut self, segments: &mut Segments, stop: StopReason) {
        if self.deferred_close {
            self.deferred_close = false;
            segments.close(stop);
        }
    }

    fn block_start(&mut self, event: &Value, segments: &mut Segments) {
        self.settle(segments, StopReason::Completed);
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let block = event.get("content_block").unwrap_or(&Value::Null);
        let text = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or("");
        let kind = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                segments.text(text("text"));
                Block::Text
            }
            Some("thinking") => {
                segments.open_thinking();
                segments.thinking(text("thinking"));
                if !text(SIGNATURE_KEY).is_empty() {
                    segments.thinking_fidelity(SIGNATURE_KEY, json!(text(SIGNATURE_KEY)));
                }
                Block::Thinking
            }
            Some("redacted_thinking") => {
                segments.open_thinking();
                segments.thinking_fidelity(REDACTED_DATA_KEY, json!(text("data")));
                Block::Thinking
            }
            Some("tool_use") => {
                let id = Some(text("id"))
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .unwrap_or_else(new_tool_call_id);
                segments.tool_call_start(&id, text("name"));
                self.tool_input_fallback = block
                    .get("input")
                    .filter(|i| i.as_object().is_some_and(|m| !m.is_empty()))
                    .map(Value::to_string)
                    .unwrap_or_else(|| "{}".to_owned());
                Block::ToolUse
            }
            _ => Block::Ignored,
        };
        self.current = Some((index, kind));
    }

    fn block_delta(&mut self, event: &Value, segments: &mut Segments) -> Result<(), LlmOutcome> {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let delta = event.get("delta").unwrap_or(&Value::Null);
        let delta_type = delta.get("type").and_then(Value::as_str).unwrap_or("");
        let field = |k: &str| delta.get(k).and_then(Value::as_str).unwrap_or("");
        let block = match self.current {
            Some((i, b)) if i == index && !self.deferred_close => b,
            _ => {
                return match delta_type {
                    "text_delta" | "thinking_delta" | "input_json_delta" | "signature_delta" => {
                        Err(classify::malformed(format!(
                            "{delta_type} for content block {index}, which is not open"
                        )))
                    }
                    _ => Ok(()),
                };
            }
        };
        match (block, delta_type) {
            (Block::Text, "text_delta") => segments.text(field("text")),
            (Block::Thinking, "thinking_delta") => segments.thinking(field("thinking")),
            (Block::Thinking, "signature_delta") => {
                segments.thinking_fidelity(SIGNATURE_KEY, json!(field(SIGNATURE_KEY)))
            }
            (Block::ToolUse, "input_json_delta") => {
                segments.tool_call_args(field("partial_json"));
            }
            (Block::Ignored, _) => {}
            // Citations and future delta kinds carry nothing this harness records.
            _ => {}
        }
        Ok(())
    }

    fn block_stop(&mut self, segments: &mut Segments) {
        if let Some((_, block)) = self.current.take() {
            if block == Block::ToolUse
                && segments.open_kind() == Some(SegmentKind::ToolCall)
                && segments.tool_call_arguments() == Some("")
            {
                let fallback = std::mem::take(&mut self.tool_input_fallback);
                segments.tool_call_args(&fallback);
            }
            if block != Block::Ignored && segments.open_kind().is_some() {
                self.deferred_close = true;
            }
        }
    }
}

impl Decoder for MessagesDecoder {
    fn event(&mut self, event: SseEvent, segments: &mut Segments) -> Result<Step, LlmOutcome> {
        let value: Value = serde_json::from_str(&event.data).map_err(|e| {
            classify::malformed(format!(
                "could not parse a stream event as JSON ({e}): {}",
                classify::truncate_chars(&event.data, 200)
            ))
        })?;
        self.saw_event = true;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or("");
        match kind {
            "message_start" => {
                overlay(&mut self.usage, value.pointer("/message/usage"));
            }
            "content_block_start" => self.block_start(&value, segments),
            "content_block_delta" => self.block_delta(&value, segments)?,
            "content_block_stop" => self.block_stop(segments),
            "message_delta" => {
                overlay(&mut self.usage, value.get("usage"));
                if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_owned());
                }
                let stop = match self.stop_reason.as_deref().and_then(stop_failure) {
                    Some(_) => StopReason::Failed,
                    None => StopReason::Completed,
                };
                self.settle(segments, stop);
            }
            "message_stop" => return Ok(Step::Done),
            "error" => {
                let err = ProviderError::from_value(&value).unwrap_or_else(|| ProviderError {
                    message: Some(classify::truncate_chars(&event.data, 500)),
                    ..Default::default()
                });
                return Err(classify::in_band(&err));
            }
            // `ping` and event types added later carry nothing to record.
            _ => {}
        }
        Ok(Step::Continue)
    }

    fn finish(&mut self, saw_terminal: bool, segments: &mut Segments) -> LlmOutcome {
        match self.stop_reason.as_deref() {
            Some(reason) => match stop_failure(reason) {
                Some(message) => {
                    self.settle(segments, StopReason::Failed);
                    segments.close(StopReason::Failed);
                    let mut o = LlmOutcome::error(StopReason::Failed, message);
                    o.permanent = true;
                    o
                }
                None => {
                    self.settle(segments, StopReason::Completed);
                    segments.close(StopReason::Completed);
                    LlmOutcome::completed(usage_counts(&self.usage))
                }
            },
            None if saw_terminal && segments.produced_anything() => {
                self.settle(segments, StopReason::Completed);
                segments.close(StopReason::Completed);
                LlmOutcome::completed(usage_counts(&self.usage))
            }
            None if saw_terminal => classify::malformed(
                "the stream ended with message_stop but carried no content and no stop_reason",
            ),
            None if !self.saw_event => classify::malformed("the model returned an empty stream"),
            None => {
                self.deferred_close = false;
                segments.close(StopReason::Malformed);
                classify::malformed(
                    "the stream ended before the response was complete (no message_stop)",
                )
            }
        }
    }
}

#[async_trait]
impl ModelClient for AnthropicClient {
    async fn stream(
        &self,
        request: ModelRequest<'_>,
        cancel: CancellationToken,
        out: &mpsc::Sender<OmniMessage>,
    ) -> LlmOutcome {
        let body = self.request_body(&request);
        let mut builder = self
            .http
            .post(&self.endpoint)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(&body);
        if let Some(key) = &self.api_key {
            builder = builder.header("x-api-key", key);
        }
        let mut decoder = MessagesDecoder::new();
        driver::run(
            builder,
            &mut decoder,
            RunContext {
                cancel: &cancel,
                out,
                idle_timeout: self.idle_timeout,
                secret: self.api_key.as_deref(),
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{
        Fidelity, assistant_text, thinking, tool_call, tool_call_output, user_image_url, user_text,
    };

    fn decode(events: &[Value]) -> (Vec<crate::protocol::ModelPayload>, LlmOutcome) {
        let mut d = MessagesDecoder::new();
        let mut seg = Segments::new();
        let mut outcome = None;
        let mut terminal = false;
        for e in events {
            let ev = SseEvent {
                event: None,
                data: e.to_string(),
            };
            match d.event(ev, &mut seg) {
                Ok(Step::Continue) => {}
                Ok(Step::Done) => {
                    terminal = true;
                    break;
                }
                Err(o) => {
                    seg.close(o.status);
                    outcome = Some(o);
                    break;
                }
            }
        }
        let outcome = outcome.unwrap_or_else(|| d.finish(terminal, &mut seg));
        let done = seg
            .drain()
            .filter_map(|m| m.model().filter(|p| !p.is_partial()).cloned())
            .collect();
        (done, outcome)
    }

    #[test]
    fn redacted_thinking_is_kept_for_replay() {
        let (done, outcome) = decode(&[
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "redacted_thinking", "data": "OPAQUE"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1,
                   "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 1,
                   "delta": {"type": "text_delta", "text": "hi"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                   "usage": {"output_tokens": 2}}),
            json!({"type": "message_stop"}),
        ]);
        assert_eq!(
            outcome,
            LlmOutcome::completed(Some(TokenCounts::new(0, 1, 2)))
        );
        let mut fid = Fidelity::new();
        fid.insert(REDACTED_DATA_KEY.into(), json!("OPAQUE"));
        assert_eq!(
            done,
            vec![
                thinking("", StopReason::Completed, Some(fid))
                    .model()
                    .cloned()
                    .unwrap(),
                assistant_text("hi", StopReason::Completed)
                    .model()
                    .cloned()
                    .unwrap(),
            ]
        );
    }

    #[test]
    fn a_delta_for_a_block_that_is_not_open_is_malformed() {
        let (_, outcome) = decode(&[
            json!({"type": "message_start", "message": {"usage": {}}}),
            json!({"type": "content_block_delta", "index": 3,
                   "delta": {"type": "text_delta", "text": "lost"}}),
        ]);
        assert_eq!(
            outcome,
            classify::malformed("text_delta for content block 3, which is not open")
        );
    }

    #[test]
    fn a_stream_without_message_stop_but_with_a_stop_reason_is_complete() {
        let (done, outcome) = decode(&[
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 4}}}),
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": "whole"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                   "usage": {"output_tokens": 1}}),
        ]);
        assert_eq!(
            outcome,
            LlmOutcome::completed(Some(TokenCounts::new(0, 4, 1)))
        );
        assert_eq!(
            done,
            vec![
                assistant_text("whole", StopReason::Completed)
                    .model()
                    .cloned()
                    .unwrap()
            ]
        );
    }

    #[test]
    fn thinking_budget_table_and_clamp() {
        use ThinkingLevel::*;
        let cases = [
            (None, 32_000, Option::None),
            (Low, 32_000, Some(2_048)),
            (Medium, 32_000, Some(8_192)),
            (High, 32_000, Some(16_384)),
            (Xhigh, 32_000, Some(30_976)),
            (Max, 100_000, Some(65_536)),
            (Medium, 4_096, Some(3_072)),
            (Low, 2_000, Option::None),
        ];
        for (level, max, want) in cases {
            assert_eq!(thinking_budget(level, max), want, "{level:?} under {max}");
            if let Some(b) = want {
                assert!(b < max && b >= MIN_THINKING_BUDGET);
            }
        }
    }

    #[test]
    fn usage_overlay_takes_message_delta_values() {
        let mut usage = Map::new();
        overlay(
            &mut usage,
            Some(
                &json!({"input_tokens": 2, "cache_creation_input_tokens": 3068,
                          "cache_read_input_tokens": 0, "output_tokens": 69}),
            ),
        );
        overlay(
            &mut usage,
            Some(
                &json!({"input_tokens": 6, "cache_creation_input_tokens": 3337,
                          "cache_read_input_tokens": 6289, "output_tokens": 198, "x": null}),
            ),
        );
        assert_eq!(
            usage_counts(&usage),
            Some(TokenCounts::new(6289, 3343, 198))
        );
        assert_eq!(usage_counts(&Map::new()), None);
    }

    #[test]
    fn history_maps_to_alternating_messages() {
        let mut signed = Fidelity::new();
        signed.insert(SIGNATURE_KEY.into(), json!("sig-1"));
        let mut redacted = Fidelity::new();
        redacted.insert(REDACTED_DATA_KEY.into(), json!("opaque"));
        let msgs = vec![
            user_text("look"),
            user_image_url("data:image/png;base64,AAAA"),
            user_image_url("https://example.com/cat.png"),
            thinking("hmm", StopReason::Completed, Some(signed)),
            thinking("", StopReason::Completed, Some(redacted)),
            thinking("unsigned", StopReason::Completed, None),
            assistant_text("calling", StopReason::Completed),
            tool_call(
                "exec_command",
                "{\"cmd\":\"ls\"}",
                "toolu_1#3",
                StopReason::Completed,
            ),
            tool_call("exec_command", "not json", "toolu_2", StopReason::Completed),
            user_text("steer"),
            tool_call_output(
                "a.txt",
                "toolu_1#3",
                StopReason::Completed,
                Some(vec!["data:image/jpeg;base64,BBBB".into()]),
            ),
            tool_call_output(
                "Tool call denied by user.",
                "toolu_2",
                StopReason::Aborted,
                None,
            ),
        ];
        assert_eq!(
            messages_json(&msgs, true),
            vec![
                json!({"role": "user", "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                    {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
                ]}),
                json!({"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig-1"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "calling"},
                    {"type": "tool_use", "id": "toolu_1", "name": "exec_command", "input": {"cmd": "ls"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "exec_command", "input": {}},
                ]}),
                json!({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                        {"type": "text", "text": "a.txt"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "BBBB"}},
                    ]},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "Tool call denied by user.", "is_error": true},
                    {"type": "text", "text": "steer"},
                ]}),
            ]
        );
        let blind = messages_json(&msgs[..3], false);
        assert_eq!(
            blind,
            vec![json!({"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "text", "text": "[attached image: inline image/png, 3 B]"},
                {"type": "text", "text": "[attached image: https://example.com/cat.png]"},
            ]})]
        );
    }
}

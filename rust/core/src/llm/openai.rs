//! OpenAI Chat Completions over SSE (`POST <base_url>/chat/completions`, `stream: true`).
//!
//! Request side: the system prompt becomes the first `system` message; the context is
//! grouped into turns ([`super::history`]); an assistant turn becomes one assistant message
//! (text, `tool_calls`, and replayed reasoning under the field name the provider used);
//! paired tool results become `tool` messages; images become `image_url` parts of a user
//! message that follows the tool messages (a `tool` message cannot carry images), or
//! `[attached image: …]` lines for a model without vision.
//!
//! Response side: [`ChatDecoder`] reads `chat.completion.chunk`s: `reasoning_content` /
//! `reasoning` deltas are thinking, `content` (and `refusal`) deltas are text, `tool_calls`
//! deltas are grouped by `index`; a call is complete, and emitted, as soon as the next call
//! starts or the stream ends. Usage snapshots overwrite each other (vLLM sends one per
//! chunk). `finish_reason: length` fails the last segment and the request.
//!
//! Choices made where providers differ:
//! - The output cap goes out as `max_completion_tokens` to api.openai.com and Azure OpenAI
//!   (their reasoning models reject `max_tokens`) and as `max_tokens` everywhere else
//!   (DeepSeek, Ollama and older vLLM / llama.cpp builds only know that name).
//! - Thinking level `none` omits `reasoning_effort` (not every model accepts `"none"`);
//!   `xhigh` and `max` send `"high"`, the highest value every reasoning model accepts.

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::classify::{self, ProviderError};
use super::driver::{self, Decoder, RunContext, Step};
use super::history::{self, AssistantItem, Turn, UserItem, attached_image_line, strip_id_suffix};
use super::segments::{SegmentKind, Segments};
use super::sse::SseEvent;
use super::{LlmOutcome, ModelClient, ModelRequest, ThinkingLevel, new_tool_call_id};
use crate::protocol::{OmniMessage, StopReason, TokenCounts};

/// Fidelity key of a thinking message: the delta field the reasoning arrived in, so it is
/// replayed under the same name.
pub const REASONING_FIELD_KEY: &str = "reasoning_field";

/// The reasoning delta fields understood, in order of preference.
const REASONING_FIELDS: [&str; 2] = ["reasoning_content", "reasoning"];

/// A Chat Completions client for one model; see the module docs.
pub struct OpenAiChatClient {
    http: reqwest::Client,
    endpoint: String,
    model_id: String,
    api_key: Option<String>,
    vision: bool,
    idle_timeout: Duration,
    cap_field: &'static str,
}

impl std::fmt::Debug for OpenAiChatClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiChatClient")
            .field("endpoint", &self.endpoint)
            .field("model_id", &self.model_id)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("vision", &self.vision)
            .finish()
    }
}

impl OpenAiChatClient {
    /// A client for `model_id` at `base_url` (which includes the version, e.g. `.../v1`).
    pub fn new(
        http: reqwest::Client,
        base_url: &reqwest::Url,
        model_id: impl Into<String>,
        api_key: Option<String>,
        vision: bool,
        idle_timeout: Duration,
    ) -> Self {
        let host = base_url.host_str().unwrap_or("").to_ascii_lowercase();
        let cap_field = if host == "api.openai.com"
            || host.ends_with(".openai.azure.com")
            || host.ends_with(".cognitiveservices.azure.com")
        {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        OpenAiChatClient {
            http,
            endpoint: format!(
                "{}/chat/completions",
                base_url.as_str().trim_end_matches('/')
            ),
            model_id: model_id.into(),
            api_key,
            vision,
            idle_timeout,
            cap_field,
        }
    }

    /// The URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The JSON body of a request.
    pub fn request_body(&self, request: &ModelRequest<'_>) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model_id));
        body.insert(
            "messages".into(),
            Value::Array(messages_json(
                request.system_prompt,
                request.messages,
                self.vision,
            )),
        );
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters.clone()
                            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                    }})
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(effort) = request.thinking.and_then(reasoning_effort) {
            body.insert("reasoning_effort".into(), json!(effort));
        }
        if let Some(cap) = request.max_tokens {
            body.insert(self.cap_field.into(), json!(cap));
        }
        Value::Object(body)
    }
}

/// `reasoning_effort` for a thinking level; `None` = omit the field.
pub fn reasoning_effort(level: ThinkingLevel) -> Option<&'static str> {
    match level {
        ThinkingLevel::None => None,
        ThinkingLevel::Low => Some("low"),
        ThinkingLevel::Medium => Some("medium"),
        ThinkingLevel::High | ThinkingLevel::Xhigh | ThinkingLevel::Max => Some("high"),
    }
}

fn image_part(url: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": url}})
}

/// The `messages` array; see the module docs.
pub fn messages_json(system_prompt: &str, messages: &[OmniMessage], vision: bool) -> Vec<Value> {
    let mut out = Vec::new();
    if !system_prompt.is_empty() {
        out.push(json!({"role": "system", "content": system_prompt}));
    }
    for turn in history::group_turns(messages) {
        match turn {
            Turn::Assistant(items) => out.push(assistant_json(&items)),
            Turn::User { results, items } => {
                // Text and image parts of the user message that follows the tool messages.
                let mut parts: Vec<(bool, String)> = Vec::new();
                for r in &results {
                    out.push(json!({
                        "role": "tool",
                        "tool_call_id": strip_id_suffix(r.tool_call_id),
                        "content": r.output,
                    }));
                    if !r.images.is_empty() {
                        parts.push((
                            false,
                            format!(
                                "[images from tool call {}]",
                                strip_id_suffix(r.tool_call_id)
                            ),
                        ));
                        for img in r.images {
                            parts.push(image_or_line(img, vision));
                        }
                    }
                }
                for item in items {
                    match item {
                        UserItem::Text(t) => parts.push((false, t.into_owned())),
                        UserItem::Image(u) => parts.push(image_or_line(&u, vision)),
                    }
                }
                if parts.is_empty() {
                    continue;
                }
                let content = if parts.iter().any(|(is_image, _)| *is_image) {
                    Value::Array(
                        parts
                            .into_iter()
                            .map(|(is_image, v)| {
                                if is_image {
                                    image_part(&v)
                                } else {
                                    json!({"type": "text", "text": v})
                                }
                            })
                            .collect(),
                    )
                } else {
                    // Plain string content: accepted by every compatible server, unlike
                    // part arrays.
                    json!(
                        parts
                            .into_iter()
                            .map(|(_, t)| t)
                            .collect::<Vec<_>>()
                            .join("\n\n")
                    )
                };
                out.push(json!({"role": "user", "content": content}));
            }
        }
    }
    out
}

/// `(true, url)` for an image the model can see, `(false, line)` for one it cannot.
fn image_or_line(url: &str, vision: bool) -> (bool, String) {
    if vision {
        (true, url.to_owned())
    } else {
        (false, attached_image_line(url))
    }
}

fn assistant_json(items: &[AssistantItem<'_>]) -> Value {
    let mut text: Vec<&str> = Vec::new();
    let mut reasoning: Option<(&str, String)> = None;
    let mut calls = Vec::new();
    for item in items {
        match item {
            AssistantItem::Text(p) => text.push(&p.text),
            AssistantItem::Thinking(p) => {
                // Reasoning goes back only under the field its provider used; reasoning from
                // elsewhere (e.g. a signed Anthropic block) has no Chat Completions form.
                let field = p
                    .fidelity
                    .as_ref()
                    .and_then(|f| f.get(REASONING_FIELD_KEY))
                    .and_then(Value::as_str)
                    .and_then(|f| REASONING_FIELDS.iter().copied().find(|k| *k == f));
                if let Some(field) = field {
                    let entry = reasoning.get_or_insert_with(|| (field, String::new()));
                    entry.1.push_str(&p.thinking);
                }
            }
            AssistantItem::ToolCall(p) => calls.push(json!({
                "id": strip_id_suffix(&p.tool_call_id),
                "type": "function",
                "function": {
                    "name": p.name,
                    "arguments": if p.arguments.trim().is_empty() { "{}" } else { p.arguments.as_str() },
                },
            })),
        }
    }
    let mut msg = Map::new();
    msg.insert("role".into(), json!("assistant"));
    let joined = text.join("\n");
    msg.insert(
        "content".into(),
        if joined.is_empty() && !calls.is_empty() {
            Value::Null
        } else {
            json!(joined)
        },
    );
    if !calls.is_empty() {
        msg.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some((field, text)) = reasoning {
        msg.insert(field.into(), json!(text));
    }
    Value::Object(msg)
}

/// Usage → [`TokenCounts`]: cached input, uncached input, reasoning + response.
///
/// `prompt_tokens` includes cached tokens (`prompt_tokens_details.cached_tokens`, or
/// DeepSeek's `prompt_cache_hit_tokens`). Output is `completion_tokens`, except where the
/// provider reports reasoning outside it (xAI: `total_tokens` > prompt + completion), where it
/// is `total_tokens − prompt_tokens`.
pub fn usage_counts(usage: &Value) -> Option<TokenCounts> {
    let num = |v: Option<&Value>| v.and_then(Value::as_u64);
    let prompt = num(usage.get("prompt_tokens"))?;
    let completion = num(usage.get("completion_tokens")).unwrap_or(0);
    let cached = num(usage.pointer("/prompt_tokens_details/cached_tokens"))
        .or_else(|| num(usage.get("prompt_cache_hit_tokens")))
        .unwrap_or(0)
        .min(prompt);
    let output = match num(usage.get("total_tokens")) {
        Some(total) => completion.max(total.saturating_sub(prompt)),
        None => completion,
    };
    Some(TokenCounts::new(cached, prompt - cached, output))
}

/// Decodes a Chat Completions stream; see the module docs.
#[derive(Debug, Default)]
pub struct ChatDecoder {
    finish_reason: Option<String>,
    usage: Option<Value>,
    saw_chunk: bool,
    /// Index of the tool call that is open in the segments.
    current_tool: Option<u64>,
    current_tool_name: String,
    /// Every tool-call index started so far.
    started_tools: HashSet<u64>,
    /// Keys for calls that arrive without an `index`.
    next_synthetic_index: u64,
    current_tool_id: Option<String>,
}

/// Synthetic indexes for index-less tool calls start here, far above any real index.
const SYNTHETIC_INDEX_BASE: u64 = 1 << 32;

impl ChatDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        ChatDecoder {
            next_synthetic_index: SYNTHETIC_INDEX_BASE,
            ..Default::default()
        }
    }

    fn tool_call_delta(&mut self, tc: &Value, segments: &mut Segments) -> Result<(), LlmOutcome> {
        let id = tc
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let name = tc
            .pointer("/function/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let args = tc
            .pointer("/function/arguments")
            .and_then(Value::as_str)
            .unwrap_or("");
        let index = match tc.get("index").and_then(Value::as_u64) {
            Some(i) => i,
            // No index: a new id (or the very first call) starts a call, anything else
            // continues the open one.
            None => match (self.current_tool, id) {
                (Some(cur), None) => cur,
                (Some(cur), Some(id)) if self.current_tool_id.as_deref() == Some(id) => cur,
                _ => {
                    self.next_synthetic_index += 1;
                    self.next_synthetic_index
                }
            },
        };
        let is_open =
            self.current_tool == Some(index) && segments.open_kind() == Some(SegmentKind::ToolCall);
        if !is_open {
            if self.started_tools.contains(&index) {
                return Err(classify::malformed(format!(
                    "tool call {index} received more data after it was closed"
                )));
            }
            let id = id.map(str::to_owned).unwrap_or_else(new_tool_call_id);
            segments.tool_call_start(&id, name);
            self.started_tools.insert(index);
            self.current_tool = Some(index);
            self.current_tool_name = name.to_owned();
            self.current_tool_id = Some(id);
        } else if !name.is_empty() && self.current_tool_name.is_empty() {
            // A name that arrives after the id (some servers repeat or delay it).
            segments.tool_call_name(name);
            self.current_tool_name = name.to_owned();
        }
        segments.tool_call_args(args);
        Ok(())
    }

    fn choice_delta(&mut self, choice: &Value, segments: &mut Segments) -> Result<(), LlmOutcome> {
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        let Some(delta) = choice.get("delta").filter(|d| d.is_object()) else {
            return Ok(());
        };
        for field in REASONING_FIELDS {
            if let Some(r) = delta
                .get(field)
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty())
            {
                segments.thinking(r);
                segments.thinking_fidelity(REASONING_FIELD_KEY, json!(field));
                break;
            }
        }
        match delta.get("content") {
            Some(Value::String(s)) => segments.text(s),
            // Content as typed parts (Mistral's magistral models).
            Some(Value::Array(parts)) => {
                for part in parts {
                    match part.get("type").and_then(Value::as_str) {
                        Some("thinking") => {
                            let pieces = part.get("thinking").and_then(Value::as_array);
                            for piece in pieces.into_iter().flatten() {
                                if let Some(t) = piece.get("text").and_then(Value::as_str) {
                                    segments.thinking(t);
                                }
                            }
                        }
                        _ => {
                            if let Some(t) = part.get("text").and_then(Value::as_str) {
                                segments.text(t);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        if let Some(refusal) = delta.get("refusal").and_then(Value::as_str) {
            segments.text(refusal);
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for tc in calls {
                self.tool_call_delta(tc, segments)?;
            }
        }
        Ok(())
    }
}

impl Decoder for ChatDecoder {
    fn event(&mut self, event: SseEvent, segments: &mut Segments) -> Result<Step, LlmOutcome> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(Step::Done);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            classify::malformed(format!(
                "could not parse a stream chunk as JSON ({e}): {}",
                classify::truncate_chars(data, 200)
            ))
        })?;
        self.saw_chunk = true;
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        if let Some(choices) = chunk.get("choices").and_then(Value::as_array) {
            // One completion was requested (n = 1); other choices are ignored.
            let first = choices
                .iter()
                .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0);
            if let Some(choice) = first {
                self.choice_delta(choice, segments)?;
            }
        }
        let error = ProviderError::from_value(&chunk).or_else(|| {
            if event.event.as_deref() != Some("error") {
                return None;
            }
            Some(
                chunk
                    .as_object()
                    .and_then(ProviderError::from_object)
                    .unwrap_or_else(|| ProviderError {
                        message: Some(classify::truncate_chars(data, 500)),
                        ..Default::default()
                    }),
            )
        });
        if let Some(err) = error {
            return Err(classify::in_band(&err));
        }
        Ok(Step::Continue)
    }

    fn finish(&mut self, saw_terminal: bool, segments: &mut Segments) -> LlmOutcome {
        let usage = self.usage.as_ref().and_then(usage_counts);
        match self.finish_reason.as_deref() {
            Some("length") => {
                segments.close(StopReason::Failed);
                let mut o = LlmOutcome::error(
                    StopReason::Failed,
                    "the response was cut off at the output token limit (finish_reason \"length\"); raise max_tokens or ask for a shorter answer",
                );
                o.permanent = true;
                o
            }
            Some("content_filter") => {
                segments.close(StopReason::Failed);
                LlmOutcome::error(
                    StopReason::Failed,
                    "the provider's content filter stopped the response (finish_reason \"content_filter\")",
                )
            }
            Some(_) => {
                segments.close(StopReason::Completed);
                LlmOutcome::completed(usage)
            }
            None if saw_terminal && segments.produced_anything() => {
                // `[DONE]` without a finish_reason (lenient servers): the answer is whole.
                segments.close(StopReason::Completed);
                LlmOutcome::completed(usage)
            }
            None if saw_terminal => classify::malformed(
                "the stream ended with [DONE] but carried no content and no finish_reason",
            ),
            None if !self.saw_chunk => classify::malformed("the model returned an empty stream"),
            None => {
                segments.close(StopReason::Malformed);
                classify::malformed(
                    "the stream ended before the response was complete (no finish_reason and no [DONE])",
                )
            }
        }
    }
}

#[async_trait]
impl ModelClient for OpenAiChatClient {
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
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(&body);
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        let mut decoder = ChatDecoder::new();
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

    /// Feeds `data:` payloads to a fresh decoder; returns complete messages and outcome.
    fn decode(chunks: &[Value]) -> (Vec<crate::protocol::ModelPayload>, LlmOutcome) {
        let mut d = ChatDecoder::new();
        let mut seg = Segments::new();
        let mut outcome = None;
        for c in chunks {
            let ev = SseEvent {
                event: None,
                data: c.to_string(),
            };
            match d.event(ev, &mut seg) {
                Ok(_) => {}
                Err(o) => {
                    seg.close(o.status);
                    outcome = Some(o);
                    break;
                }
            }
        }
        let outcome = outcome.unwrap_or_else(|| d.finish(false, &mut seg));
        let done = seg
            .drain()
            .filter_map(|m| m.model().filter(|p| !p.is_partial()).cloned())
            .collect();
        (done, outcome)
    }

    fn delta(d: Value) -> Value {
        json!({"choices": [{"index": 0, "delta": d, "finish_reason": null}]})
    }

    fn finish(reason: &str) -> Value {
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    }

    fn call(id: &str, name: &str, args: &str, stop: StopReason) -> crate::protocol::ModelPayload {
        tool_call(name, args, id, stop).model().cloned().unwrap()
    }

    #[test]
    fn index_less_tool_calls_are_told_apart_by_id() {
        let (done, outcome) = decode(&[
            delta(
                json!({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{\"x\""}}]}),
            ),
            delta(json!({"tool_calls": [{"function": {"arguments": ":1}"}}]})),
            delta(
                json!({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": "{}"}}]}),
            ),
            finish("tool_calls"),
        ]);
        assert_eq!(outcome.status, StopReason::Completed);
        assert_eq!(
            done,
            vec![
                call("a", "f", "{\"x\":1}", StopReason::Completed),
                call("b", "g", "{}", StopReason::Completed),
            ]
        );
    }

    #[test]
    fn a_name_that_arrives_late_reaches_the_complete_call() {
        let (done, _) = decode(&[
            delta(json!({"tool_calls": [{"index": 0, "id": "a", "function": {"arguments": ""}}]})),
            delta(
                json!({"tool_calls": [{"index": 0, "function": {"name": "exec_command", "arguments": "{}"}}]}),
            ),
            finish("tool_calls"),
        ]);
        assert_eq!(
            done,
            vec![call("a", "exec_command", "{}", StopReason::Completed)]
        );
    }

    #[test]
    fn a_call_without_id_gets_one() {
        let (done, _) = decode(&[
            delta(
                json!({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{}"}}]}),
            ),
            finish("tool_calls"),
        ]);
        let [crate::protocol::ModelPayload::ToolCall(c)] = done.as_slice() else {
            panic!("{done:?}")
        };
        assert!(
            c.tool_call_id.starts_with("call_") && c.tool_call_id.len() == 21,
            "{c:?}"
        );
    }

    #[test]
    fn more_data_for_a_closed_call_is_malformed() {
        let (done, outcome) = decode(&[
            delta(
                json!({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": "{"}}]}),
            ),
            delta(
                json!({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "g", "arguments": "{}"}}]}),
            ),
            delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]})),
        ]);
        assert_eq!(outcome.status, StopReason::Malformed);
        assert_eq!(
            outcome.error_message.as_deref(),
            Some("tool call 0 received more data after it was closed")
        );
        assert_eq!(
            done,
            vec![
                call("a", "f", "{", StopReason::Completed),
                call("b", "g", "{}", StopReason::Malformed),
            ]
        );
    }

    #[test]
    fn empty_content_next_to_reasoning_does_not_split_thinking() {
        let (done, outcome) = decode(&[
            delta(json!({"content": "", "reasoning": "a"})),
            delta(json!({"content": "", "reasoning": "b"})),
            delta(json!({"content": "answer", "reasoning": null})),
            finish("stop"),
        ]);
        assert_eq!(outcome.status, StopReason::Completed);
        let mut fid = Fidelity::new();
        fid.insert(REASONING_FIELD_KEY.into(), json!("reasoning"));
        assert_eq!(
            done,
            vec![
                thinking("ab", StopReason::Completed, Some(fid))
                    .model()
                    .cloned()
                    .unwrap(),
                assistant_text("answer", StopReason::Completed)
                    .model()
                    .cloned()
                    .unwrap(),
            ]
        );
    }

    #[test]
    fn content_parts_split_into_thinking_and_text() {
        let (done, _) = decode(&[
            delta(
                json!({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "hm"}]}]}),
            ),
            delta(json!({"content": [{"type": "text", "text": "ok"}]})),
            finish("stop"),
        ]);
        assert_eq!(
            done,
            vec![
                thinking("hm", StopReason::Completed, None)
                    .model()
                    .cloned()
                    .unwrap(),
                assistant_text("ok", StopReason::Completed)
                    .model()
                    .cloned()
                    .unwrap(),
            ]
        );
    }

    #[test]
    fn usage_normalization_table() {
        let cases = vec![
            (
                "plain OpenAI",
                json!({"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
                       "prompt_tokens_details": {"cached_tokens": 30}}),
                TokenCounts::new(30, 70, 20),
            ),
            (
                "DeepSeek cache fields",
                json!({"prompt_tokens": 400, "completion_tokens": 50, "total_tokens": 450,
                       "prompt_cache_hit_tokens": 320, "prompt_cache_miss_tokens": 80}),
                TokenCounts::new(320, 80, 50),
            ),
            (
                "xAI reasoning outside completion_tokens",
                json!({"prompt_tokens": 361, "completion_tokens": 26, "total_tokens": 622,
                       "prompt_tokens_details": {"cached_tokens": 360},
                       "completion_tokens_details": {"reasoning_tokens": 235}}),
                TokenCounts::new(360, 1, 261),
            ),
            (
                "no total",
                json!({"prompt_tokens": 5, "completion_tokens": 2}),
                TokenCounts::new(0, 5, 2),
            ),
        ];
        for (name, usage, want) in cases {
            assert_eq!(usage_counts(&usage), Some(want), "{name}");
        }
        assert_eq!(usage_counts(&json!({})), None);
    }

    #[test]
    fn effort_table() {
        use ThinkingLevel::*;
        let got: Vec<_> = [None, Low, Medium, High, Xhigh, Max]
            .into_iter()
            .map(reasoning_effort)
            .collect();
        assert_eq!(
            got,
            vec![
                Option::None,
                Some("low"),
                Some("medium"),
                Some("high"),
                Some("high"),
                Some("high")
            ]
        );
    }

    #[test]
    fn history_maps_to_chat_messages() {
        let mut fid = Fidelity::new();
        fid.insert(REASONING_FIELD_KEY.into(), json!("reasoning_content"));
        let msgs = vec![
            user_text("look"),
            user_image_url("data:image/png;base64,AAAA"),
            thinking("hmm", StopReason::Completed, Some(fid)),
            thinking("unsigned foreign", StopReason::Completed, None),
            assistant_text("calling", StopReason::Completed),
            tool_call(
                "exec_command",
                "{\"cmd\":\"ls\"}",
                "call_1#2",
                StopReason::Completed,
            ),
            tool_call_output(
                "a.txt",
                "call_1#2",
                StopReason::Completed,
                Some(vec!["data:image/png;base64,BBBB".into()]),
            ),
            user_text("more"),
        ];
        let got = messages_json("sys", &msgs, true);
        assert_eq!(
            got,
            vec![
                json!({"role": "system", "content": "sys"}),
                json!({"role": "user", "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ]}),
                json!({"role": "assistant", "content": "calling",
                       "tool_calls": [{"id": "call_1", "type": "function",
                                       "function": {"name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"}}],
                       "reasoning_content": "hmm"}),
                json!({"role": "tool", "tool_call_id": "call_1", "content": "a.txt"}),
                json!({"role": "user", "content": [
                    {"type": "text", "text": "[images from tool call call_1]"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,BBBB"}},
                    {"type": "text", "text": "more"},
                ]}),
            ]
        );
        let blind = messages_json("", &msgs, false);
        assert_eq!(
            blind[0],
            json!({"role": "user", "content": "look\n\n[attached image: inline image/png, 3 B]"})
        );
        assert_eq!(
            blind[3],
            json!({"role": "user", "content": "[images from tool call call_1]\n\n[attached image: inline image/png, 3 B]\n\nmore"})
        );
    }
}

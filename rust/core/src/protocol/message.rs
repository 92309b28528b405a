//! The OmniMessage envelope and every payload it can carry (SPEC §1).
//!
//! One JSON shape serves the SDK stream, the trace file and any wire forwarding:
//! `{timestamp, type, payload, origin?}`. The envelope is (de)serialized by hand so that the
//! outer `type` selects the payload enum; payloads themselves are serde-tagged by their inner
//! `type`. Optional fields are omitted, never `null`, except where the SPEC says otherwise.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Opaque provider object replayed verbatim to the provider (thinking signatures, reasoning
/// field names, ...). Omitted from JSON when empty.
pub type Fidelity = Map<String, Value>;

/// How a model message, a tool output or a request ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Finished normally.
    #[default]
    Completed,
    /// A non-retryable error or a failed tool.
    Failed,
    /// Interrupted by the user.
    Aborted,
    /// The model request timed out (idle timeout, 429/5xx, network).
    Timeout,
    /// The model's response could not be parsed or was cut short.
    Malformed,
    /// The provider rejected the credentials.
    Auth,
}

impl StopReason {
    /// The wire name (`completed`, `failed`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Completed => "completed",
            StopReason::Failed => "failed",
            StopReason::Aborted => "aborted",
            StopReason::Timeout => "timeout",
            StopReason::Malformed => "malformed",
            StopReason::Auth => "auth",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who produced a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person (or the harness on their behalf, e.g. tool outputs).
    User,
    /// The model.
    Assistant,
}

/// Phase of a streamed fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventType {
    /// Opens a segment.
    Start,
    /// Carries incremental content.
    Delta,
    /// Closes a segment; carries the segment's stop reason.
    Stop,
}

/// The outer category of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageType {
    /// Session metadata, first line of every trace file.
    SessionMeta,
    /// Model input or output, complete or partial.
    ModelMsg,
    /// Control and statistics events.
    EventMsg,
}

/// A model's context window: a token count, or `"unknown"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ContextWindow {
    /// Known size in tokens.
    Tokens(u64),
    /// Not configured.
    #[default]
    Unknown,
}

impl Serialize for ContextWindow {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ContextWindow::Tokens(n) => s.serialize_u64(*n),
            ContextWindow::Unknown => s.serialize_str("unknown"),
        }
    }
}

impl<'de> Deserialize<'de> for ContextWindow {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Number(n) => n.as_u64().map(ContextWindow::Tokens).ok_or_else(|| {
                D::Error::custom("model_context_window must be a non-negative integer")
            }),
            Value::String(s) if s == "unknown" => Ok(ContextWindow::Unknown),
            other => Err(D::Error::custom(format!(
                "model_context_window must be a number or \"unknown\", got {other}"
            ))),
        }
    }
}

/// Why a session exists, when it was not created by a person.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionSource {
    /// Spawned by `run_subagent`.
    Subagent,
    /// Started by a scheduled task.
    Schedule,
}

/// `session_meta` payload: the session's invariants.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    /// `session-YYYY-MM-DD-HH-mm-ss-<8hex>`.
    pub session_id: String,
    /// Provider group of the session model.
    pub provider: String,
    /// Upstream model id.
    pub model_id: String,
    /// Context window of the model, or `"unknown"`.
    pub model_context_window: ContextWindow,
    /// The system prompt with its placeholders substituted.
    pub system_prompt: String,
    /// Absolute path of the agent state folder.
    pub agent_state: String,
    /// Absolute path of the workspace.
    pub workspace: String,
    /// Set for sessions not created by a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SessionSource>,
}

fn fidelity_is_empty(f: &Option<Fidelity>) -> bool {
    f.as_ref().is_none_or(Map::is_empty)
}

/// Complete text, from the user or the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TextPayload {
    /// Author.
    pub role: Role,
    /// The text.
    pub text: String,
    /// How the text ended.
    #[serde(default)]
    pub stop_reason: StopReason,
    /// Provider replay data.
    #[serde(default, skip_serializing_if = "fidelity_is_empty")]
    pub fidelity: Option<Fidelity>,
}

/// Complete model reasoning.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThinkingPayload {
    /// Always `assistant`.
    pub role: Role,
    /// The reasoning text.
    pub thinking: String,
    /// How the block ended.
    #[serde(default)]
    pub stop_reason: StopReason,
    /// Provider replay data (e.g. a signature).
    #[serde(default, skip_serializing_if = "fidelity_is_empty")]
    pub fidelity: Option<Fidelity>,
}

/// Opaque binary reasoning (e.g. encrypted), base64.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InlineThinkingPayload {
    /// Always `assistant`.
    pub role: Role,
    /// Base64 bytes.
    pub data: String,
    /// MIME type of `data`.
    pub mime_type: String,
    /// How the block ended.
    #[serde(default)]
    pub stop_reason: StopReason,
    /// Provider replay data.
    #[serde(default, skip_serializing_if = "fidelity_is_empty")]
    pub fidelity: Option<Fidelity>,
}

/// A request by the model to run a tool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallPayload {
    /// Always `assistant`.
    pub role: Role,
    /// Tool name.
    pub name: String,
    /// Arguments as a JSON string, exactly as the model produced them.
    pub arguments: String,
    /// Identifier pairing the call with its output.
    pub tool_call_id: String,
    /// `completed` for a call that may be dispatched; anything else is an interrupted call.
    #[serde(default)]
    pub stop_reason: StopReason,
    /// Provider replay data.
    #[serde(default, skip_serializing_if = "fidelity_is_empty")]
    pub fidelity: Option<Fidelity>,
}

/// The result of one tool call, fed back to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallOutputPayload {
    /// Always `user`.
    pub role: Role,
    /// The model-visible text (content, then notes).
    pub output: String,
    /// Images as `data:` URLs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<Vec<String>>,
    /// The call this answers.
    pub tool_call_id: String,
    /// How the tool ended.
    #[serde(default)]
    pub stop_reason: StopReason,
}

/// An image given by URL (web or data URL).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImageUrlPayload {
    /// Always `user`.
    pub role: Role,
    /// The URL.
    pub image_url: String,
    /// Always `completed`.
    #[serde(default)]
    pub stop_reason: StopReason,
}

/// Inline binary data (e.g. an image), base64.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InlineDataPayload {
    /// Author.
    pub role: Role,
    /// Base64 bytes.
    pub data: String,
    /// MIME type.
    pub mime_type: String,
    /// Always `completed` for inputs.
    #[serde(default)]
    pub stop_reason: StopReason,
    /// Provider replay data.
    #[serde(default, skip_serializing_if = "fidelity_is_empty")]
    pub fidelity: Option<Fidelity>,
}

/// Streamed text fragment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PartialTextPayload {
    /// Always `assistant`.
    pub role: Role,
    /// Phase.
    pub event_type: EventType,
    /// The fragment (empty on start/stop).
    pub text: String,
    /// The segment's stop reason (meaningful on `stop`).
    #[serde(default)]
    pub stop_reason: StopReason,
}

/// Streamed reasoning fragment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PartialThinkingPayload {
    /// Always `assistant`.
    pub role: Role,
    /// Phase.
    pub event_type: EventType,
    /// The fragment.
    pub thinking: String,
    /// The segment's stop reason.
    #[serde(default)]
    pub stop_reason: StopReason,
}

/// Streamed tool-call fragment: `name` on start only, argument fragments on deltas.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PartialToolCallPayload {
    /// Always `assistant`.
    pub role: Role,
    /// Phase.
    pub event_type: EventType,
    /// Tool name on `start`, `""` afterwards.
    pub name: String,
    /// Fragment of the arguments JSON.
    pub arguments: String,
    /// The call's identifier.
    pub tool_call_id: String,
    /// The segment's stop reason.
    #[serde(default)]
    pub stop_reason: StopReason,
}

/// Streamed tool-output fragment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PartialToolCallOutputPayload {
    /// Always `user`.
    pub role: Role,
    /// Phase.
    pub event_type: EventType,
    /// Fragment of the output text.
    pub output: String,
    /// The whole image set, in one delta right before `stop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<Vec<String>>,
    /// The call this output answers.
    pub tool_call_id: String,
    /// The segment's stop reason.
    #[serde(default)]
    pub stop_reason: StopReason,
}

/// Every `model_msg` payload, complete and partial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ModelPayload {
    /// Complete text.
    Text(TextPayload),
    /// Complete reasoning.
    Thinking(ThinkingPayload),
    /// Complete opaque reasoning.
    InlineThinking(InlineThinkingPayload),
    /// Complete tool call.
    ToolCall(ToolCallPayload),
    /// Complete tool output.
    ToolCallOutput(ToolCallOutputPayload),
    /// Image by URL.
    ImageUrl(ImageUrlPayload),
    /// Inline binary data.
    InlineData(InlineDataPayload),
    /// Streamed text fragment.
    PartialText(PartialTextPayload),
    /// Streamed reasoning fragment.
    PartialThinking(PartialThinkingPayload),
    /// Streamed tool-call fragment.
    PartialToolCall(PartialToolCallPayload),
    /// Streamed tool-output fragment.
    PartialToolCallOutput(PartialToolCallOutputPayload),
}

impl ModelPayload {
    /// True for the four `partial_*` payloads (never persisted).
    pub fn is_partial(&self) -> bool {
        matches!(
            self,
            ModelPayload::PartialText(_)
                | ModelPayload::PartialThinking(_)
                | ModelPayload::PartialToolCall(_)
                | ModelPayload::PartialToolCallOutput(_)
        )
    }

    /// The payload's role.
    pub fn role(&self) -> Role {
        match self {
            ModelPayload::Text(p) => p.role,
            ModelPayload::Thinking(p) => p.role,
            ModelPayload::InlineThinking(p) => p.role,
            ModelPayload::ToolCall(p) => p.role,
            ModelPayload::ToolCallOutput(p) => p.role,
            ModelPayload::ImageUrl(p) => p.role,
            ModelPayload::InlineData(p) => p.role,
            ModelPayload::PartialText(p) => p.role,
            ModelPayload::PartialThinking(p) => p.role,
            ModelPayload::PartialToolCall(p) => p.role,
            ModelPayload::PartialToolCallOutput(p) => p.role,
        }
    }

    /// The payload's stop reason.
    pub fn stop_reason(&self) -> StopReason {
        match self {
            ModelPayload::Text(p) => p.stop_reason,
            ModelPayload::Thinking(p) => p.stop_reason,
            ModelPayload::InlineThinking(p) => p.stop_reason,
            ModelPayload::ToolCall(p) => p.stop_reason,
            ModelPayload::ToolCallOutput(p) => p.stop_reason,
            ModelPayload::ImageUrl(p) => p.stop_reason,
            ModelPayload::InlineData(p) => p.stop_reason,
            ModelPayload::PartialText(p) => p.stop_reason,
            ModelPayload::PartialThinking(p) => p.stop_reason,
            ModelPayload::PartialToolCall(p) => p.stop_reason,
            ModelPayload::PartialToolCallOutput(p) => p.stop_reason,
        }
    }
}

/// An approval outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run the call.
    Allow,
    /// Do not run it; the model reads `Tool call denied by user.`.
    Deny,
    /// Vetoed by policy; the model reads `Tool call denied by policy.`.
    Forbidden,
}

impl Decision {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Forbidden => "forbidden",
        }
    }
}

/// Token counts of one request or a whole session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenCounts {
    /// Input tokens served from the provider's cache.
    pub cache_read: u64,
    /// Input tokens not served from cache.
    pub cache_write: u64,
    /// Output tokens (reasoning + response).
    pub output: u64,
    /// Sum of the three.
    pub total: u64,
}

impl TokenCounts {
    /// Builds counts and derives `total`.
    pub fn new(cache_read: u64, cache_write: u64, output: u64) -> Self {
        TokenCounts {
            cache_read,
            cache_write,
            output,
            total: cache_read + cache_write + output,
        }
    }

    /// Field-wise sum (session accumulation).
    pub fn add(&self, other: &TokenCounts) -> TokenCounts {
        TokenCounts {
            cache_read: self.cache_read + other.cache_read,
            cache_write: self.cache_write + other.cache_write,
            output: self.output + other.output,
            total: self.total + other.total,
        }
    }
}

/// `request_end` payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestEndPayload {
    /// Terminal state of the request.
    pub status: StopReason,
    /// Error detail, only on non-completed requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// 1-based attempt number; on failures and on a completion that needed retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// Planned wait before the retry; only when the engine will retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_in_ms: Option<u64>,
}

/// `approval_decision` payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalDecisionPayload {
    /// The decision.
    pub decision: Decision,
    /// The call decided on.
    pub tool_call_id: String,
    /// Why the decision is a deny when the approval callback failed (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
}

/// `token_usage` payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenUsagePayload {
    /// Running session total.
    pub session: TokenCounts,
    /// The latest request.
    pub request: TokenCounts,
}

/// What triggered a compaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionReason {
    /// Context threshold reached.
    Context,
    /// Turn threshold reached.
    Turns,
    /// Requested by the user.
    Manual,
}

/// How the context is compacted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionMode {
    /// Summarize into a fresh context.
    Summarize,
    /// Drop the context.
    Discard,
}

/// `compaction_begin` payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompactionBeginPayload {
    /// Trigger.
    pub reason: CompactionReason,
    /// Mode.
    pub mode: CompactionMode,
    /// Context tokens at the trigger.
    pub context: u64,
    /// Session turns at the trigger.
    pub turns: u64,
}

/// `compaction_end` payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompactionEndPayload {
    /// Trigger.
    pub reason: CompactionReason,
    /// Mode.
    pub mode: CompactionMode,
    /// Result.
    pub status: StopReason,
    /// Final attempt number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// Failure detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
}

/// `abort` payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AbortPayload {
    /// Why the task stopped (`aborted by user`, `llm request error: ...`).
    #[serde(default)]
    pub reason: Option<String>,
}

/// `subagent` pointer payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubagentPayload {
    /// The direct child session's id.
    pub session_id: String,
}

/// A tool as offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Tool name.
    pub name: String,
    /// Description for the model.
    pub description: String,
    /// JSON Schema of the arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

/// `tool_list_ready` payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolListReadyPayload {
    /// The tools offered to the model.
    pub tools: Vec<ToolSpec>,
}

/// Every `event_msg` payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventPayload {
    /// A model request starts.
    RequestBegin {},
    /// A model request ended.
    RequestEnd(RequestEndPayload),
    /// One approval decision.
    ApprovalDecision(ApprovalDecisionPayload),
    /// Token usage after a request.
    TokenUsage(TokenUsagePayload),
    /// Compaction starts.
    CompactionBegin(CompactionBeginPayload),
    /// Compaction ended.
    CompactionEnd(CompactionEndPayload),
    /// The task stopped early; always the last message of a run.
    Abort(AbortPayload),
    /// Pointer to a direct child session's trace.
    Subagent(SubagentPayload),
    /// The tools offered to the model.
    ToolListReady(ToolListReadyPayload),
}

/// The payload of an envelope, selected by the outer `type`.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// `session_meta`.
    SessionMeta(SessionMeta),
    /// `model_msg`.
    Model(ModelPayload),
    /// `event_msg`.
    Event(EventPayload),
}

/// One message of the protocol.
#[derive(Clone, Debug, PartialEq)]
pub struct OmniMessage {
    /// ISO-8601 UTC with milliseconds, e.g. `2026-11-29T13:36:10.123Z`.
    pub timestamp: String,
    /// The payload.
    pub body: Body,
    /// Chain of child session ids, outer to inner; `None` for the main session (never empty).
    pub origin: Option<Vec<String>>,
}

impl OmniMessage {
    /// The outer type.
    pub fn message_type(&self) -> MessageType {
        match self.body {
            Body::SessionMeta(_) => MessageType::SessionMeta,
            Body::Model(_) => MessageType::ModelMsg,
            Body::Event(_) => MessageType::EventMsg,
        }
    }

    /// The model payload, if this is a `model_msg`.
    pub fn model(&self) -> Option<&ModelPayload> {
        match &self.body {
            Body::Model(p) => Some(p),
            _ => None,
        }
    }

    /// The event payload, if this is an `event_msg`.
    pub fn event(&self) -> Option<&EventPayload> {
        match &self.body {
            Body::Event(p) => Some(p),
            _ => None,
        }
    }

    /// The tool call, if this is a complete `tool_call`.
    pub fn as_tool_call(&self) -> Option<&ToolCallPayload> {
        match &self.body {
            Body::Model(ModelPayload::ToolCall(p)) => Some(p),
            _ => None,
        }
    }

    /// The tool output, if this is a complete `tool_call_output`.
    pub fn as_tool_call_output(&self) -> Option<&ToolCallOutputPayload> {
        match &self.body {
            Body::Model(ModelPayload::ToolCallOutput(p)) => Some(p),
            _ => None,
        }
    }

    /// True when the message carries an origin chain (it comes from a child session).
    pub fn has_origin(&self) -> bool {
        self.origin.as_ref().is_some_and(|o| !o.is_empty())
    }

    /// Serializes to one compact JSON line (the trace format). Never fails: every field is
    /// plain data.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| {
            // Unreachable for these types (string keys, finite numbers); keep the trace
            // readable rather than panicking.
            format!(
                "{{\"serialization_error\":{}}}",
                Value::String(e.to_string())
            )
        })
    }
}

impl Serialize for OmniMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(if self.origin.is_some() { 4 } else { 3 }))?;
        map.serialize_entry("timestamp", &self.timestamp)?;
        map.serialize_entry("type", &self.message_type())?;
        match &self.body {
            Body::SessionMeta(p) => map.serialize_entry("payload", p)?,
            Body::Model(p) => map.serialize_entry("payload", p)?,
            Body::Event(p) => map.serialize_entry("payload", p)?,
        }
        if let Some(origin) = self.origin.as_ref().filter(|o| !o.is_empty()) {
            map.serialize_entry("origin", origin)?;
        }
        map.end()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnvelope {
    timestamp: String,
    #[serde(rename = "type")]
    kind: MessageType,
    payload: Value,
    #[serde(default)]
    origin: Option<Vec<String>>,
}

impl<'de> Deserialize<'de> for OmniMessage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = RawEnvelope::deserialize(d)?;
        let body = match raw.kind {
            MessageType::SessionMeta => {
                Body::SessionMeta(serde_json::from_value(raw.payload).map_err(D::Error::custom)?)
            }
            MessageType::ModelMsg => {
                Body::Model(serde_json::from_value(raw.payload).map_err(D::Error::custom)?)
            }
            MessageType::EventMsg => {
                Body::Event(serde_json::from_value(raw.payload).map_err(D::Error::custom)?)
            }
        };
        Ok(OmniMessage {
            timestamp: raw.timestamp,
            body,
            origin: raw.origin.filter(|o| !o.is_empty()),
        })
    }
}

//! Builders for every message the harness produces, plus the guards of SPEC §1.
//!
//! Builders stamp the current UTC time and put `stop_reason` (default `completed`) on every
//! model payload, partials included, so producers never assemble envelopes by hand.

use super::message::*;

/// Current time as ISO-8601 UTC with milliseconds (`2026-11-29T13:36:10.123Z`).
pub fn now_timestamp() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// Wraps a model payload in an envelope.
pub fn model_msg(payload: ModelPayload) -> OmniMessage {
    OmniMessage {
        timestamp: now_timestamp(),
        body: Body::Model(payload),
        origin: None,
    }
}

/// Wraps an event payload in an envelope.
pub fn event_msg(payload: EventPayload) -> OmniMessage {
    OmniMessage {
        timestamp: now_timestamp(),
        body: Body::Event(payload),
        origin: None,
    }
}

/// Wraps session metadata in an envelope.
pub fn session_meta(meta: SessionMeta) -> OmniMessage {
    OmniMessage {
        timestamp: now_timestamp(),
        body: Body::SessionMeta(meta),
        origin: None,
    }
}

/// A user's text.
pub fn user_text(text: impl Into<String>) -> OmniMessage {
    model_msg(ModelPayload::Text(TextPayload {
        role: Role::User,
        text: text.into(),
        stop_reason: StopReason::Completed,
        fidelity: None,
    }))
}

/// A model's complete text.
pub fn assistant_text(text: impl Into<String>, stop_reason: StopReason) -> OmniMessage {
    model_msg(ModelPayload::Text(TextPayload {
        role: Role::Assistant,
        text: text.into(),
        stop_reason,
        fidelity: None,
    }))
}

/// A model's complete reasoning.
pub fn thinking(
    text: impl Into<String>,
    stop_reason: StopReason,
    fidelity: Option<Fidelity>,
) -> OmniMessage {
    model_msg(ModelPayload::Thinking(ThinkingPayload {
        role: Role::Assistant,
        thinking: text.into(),
        stop_reason,
        fidelity,
    }))
}

/// A model's complete tool call.
pub fn tool_call(
    name: impl Into<String>,
    arguments: impl Into<String>,
    tool_call_id: impl Into<String>,
    stop_reason: StopReason,
) -> OmniMessage {
    model_msg(ModelPayload::ToolCall(ToolCallPayload {
        role: Role::Assistant,
        name: name.into(),
        arguments: arguments.into(),
        tool_call_id: tool_call_id.into(),
        stop_reason,
        fidelity: None,
    }))
}

/// A complete tool output.
pub fn tool_call_output(
    output: impl Into<String>,
    tool_call_id: impl Into<String>,
    stop_reason: StopReason,
    images: Option<Vec<String>>,
) -> OmniMessage {
    model_msg(ModelPayload::ToolCallOutput(ToolCallOutputPayload {
        role: Role::User,
        output: output.into(),
        images: images.filter(|i| !i.is_empty()),
        tool_call_id: tool_call_id.into(),
        stop_reason,
    }))
}

/// A user image by URL (web or data URL).
pub fn user_image_url(url: impl Into<String>) -> OmniMessage {
    model_msg(ModelPayload::ImageUrl(ImageUrlPayload {
        role: Role::User,
        image_url: url.into(),
        stop_reason: StopReason::Completed,
    }))
}

/// Streamed text fragment.
pub fn partial_text(
    event_type: EventType,
    text: impl Into<String>,
    stop_reason: StopReason,
) -> OmniMessage {
    model_msg(ModelPayload::PartialText(PartialTextPayload {
        role: Role::Assistant,
        event_type,
        text: text.into(),
        stop_reason,
    }))
}

/// Streamed reasoning fragment.
pub fn partial_thinking(
    event_type: EventType,
    text: impl Into<String>,
    stop_reason: StopReason,
) -> OmniMessage {
    model_msg(ModelPayload::PartialThinking(PartialThinkingPayload {
        role: Role::Assistant,
        event_type,
        thinking: text.into(),
        stop_reason,
    }))
}

/// Streamed tool-call fragment.
pub fn partial_tool_call(
    event_type: EventType,
    name: impl Into<String>,
    arguments: impl Into<String>,
    tool_call_id: impl Into<String>,
    stop_reason: StopReason,
) -> OmniMessage {
    model_msg(ModelPayload::PartialToolCall(PartialToolCallPayload {
        role: Role::Assistant,
        event_type,
        name: name.into(),
        arguments: arguments.into(),
        tool_call_id: tool_call_id.into(),
        stop_reason,
    }))
}

/// Streamed tool-output fragment.
pub fn partial_tool_call_output(
    event_type: EventType,
    output: impl Into<String>,
    tool_call_id: impl Into<String>,
    stop_reason: StopReason,
    images: Option<Vec<String>>,
) -> OmniMessage {
    model_msg(ModelPayload::PartialToolCallOutput(
        PartialToolCallOutputPayload {
            role: Role::User,
            event_type,
            output: output.into(),
            images,
            tool_call_id: tool_call_id.into(),
            stop_reason,
        },
    ))
}

/// `request_begin`.
pub fn request_begin() -> OmniMessage {
    event_msg(EventPayload::RequestBegin {})
}

/// `request_end`.
pub fn request_end(
    status: StopReason,
    error_message: Option<String>,
    attempt: Option<u32>,
    retry_in_ms: Option<u64>,
) -> OmniMessage {
    event_msg(EventPayload::RequestEnd(RequestEndPayload {
        status,
        error_message: if status == StopReason::Completed {
            None
        } else {
            error_message
        },
        attempt,
        retry_in_ms,
    }))
}

/// `approval_decision`.
pub fn approval_decision(decision: Decision, tool_call_id: impl Into<String>) -> OmniMessage {
    event_msg(EventPayload::ApprovalDecision(ApprovalDecisionPayload {
        decision,
        tool_call_id: tool_call_id.into(),
        error_message: None,
    }))
}

/// `token_usage`.
pub fn token_usage(session: TokenCounts, request: TokenCounts) -> OmniMessage {
    event_msg(EventPayload::TokenUsage(TokenUsagePayload {
        session,
        request,
    }))
}

/// `abort`.
pub fn abort(reason: impl Into<String>) -> OmniMessage {
    event_msg(EventPayload::Abort(AbortPayload {
        reason: Some(reason.into()),
    }))
}

/// `subagent` pointer.
pub fn subagent(session_id: impl Into<String>) -> OmniMessage {
    event_msg(EventPayload::Subagent(SubagentPayload {
        session_id: session_id.into(),
    }))
}

/// Prepends one forwarding hop (a child session id) to the message's origin chain.
pub fn with_origin(mut msg: OmniMessage, child_session_id: &str) -> OmniMessage {
    let mut chain = vec![child_session_id.to_owned()];
    if let Some(rest) = msg.origin.take() {
        chain.extend(rest);
    }
    msg.origin = Some(chain);
    msg
}

/// A complete (traceable) model message: `model_msg` and not `partial_*`.
pub fn is_complete_model_message(msg: &OmniMessage) -> bool {
    matches!(&msg.body, Body::Model(p) if !p.is_partial())
}

/// A `partial_*` model message.
pub fn is_partial_payload(msg: &OmniMessage) -> bool {
    matches!(&msg.body, Body::Model(p) if p.is_partial())
}

/// An `event_msg`.
pub fn is_event_message(msg: &OmniMessage) -> bool {
    matches!(msg.body, Body::Event(_))
}

/// A `session_meta`.
pub fn is_session_meta(msg: &OmniMessage) -> bool {
    matches!(msg.body, Body::SessionMeta(_))
}

/// Whether the trace records this message: everything except partials and origin-tagged ones.
pub fn is_traceable(msg: &OmniMessage) -> bool {
    !msg.has_origin() && !is_partial_payload(msg)
}

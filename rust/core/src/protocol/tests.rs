//! Round-trip tests: every payload kind serializes to the exact SPEC §1 JSON and back.

use serde_json::{Value, json};

use super::*;

const TS: &str = "2026-11-29T13:36:10.123Z";

fn at(mut msg: OmniMessage) -> OmniMessage {
    msg.timestamp = TS.to_owned();
    msg
}

fn fidelity() -> Fidelity {
    let Value::Object(map) = json!({"signature": "sig-1", "zeta": 1, "alpha": 2}) else {
        unreachable!("literal object")
    };
    map
}

fn cases() -> Vec<(&'static str, OmniMessage, Value)> {
    let meta = SessionMeta {
        session_id: "session-2026-11-29-13-36-10-0a1b2c3d".into(),
        provider: "openai".into(),
        model_id: "gpt-4o".into(),
        model_context_window: ContextWindow::Tokens(128000),
        system_prompt: "You are helpful.".into(),
        agent_state: "/root/.penguin/data/p/agents/a/agent_state".into(),
        workspace: "/tmp/ws".into(),
        source: None,
    };
    let mut child_meta = meta.clone();
    child_meta.model_context_window = ContextWindow::Unknown;
    child_meta.source = Some(SessionSource::Subagent);
    let mut thinking_msg = thinking("hmm", StopReason::Completed, Some(fidelity()));
    thinking_msg.timestamp = TS.into();
    vec![
        (
            "session_meta",
            session_meta(meta),
            json!({"timestamp": TS, "type": "session_meta", "payload": {
                "session_id": "session-2026-11-29-13-36-10-0a1b2c3d", "provider": "openai",
                "model_id": "gpt-4o", "model_context_window": 128000,
                "system_prompt": "You are helpful.",
                "agent_state": "/root/.penguin/data/p/agents/a/agent_state", "workspace": "/tmp/ws"}}),
        ),
        (
            "session_meta subagent unknown window",
            session_meta(child_meta),
            json!({"timestamp": TS, "type": "session_meta", "payload": {
                "session_id": "session-2026-11-29-13-36-10-0a1b2c3d", "provider": "openai",
                "model_id": "gpt-4o", "model_context_window": "unknown",
                "system_prompt": "You are helpful.",
                "agent_state": "/root/.penguin/data/p/agents/a/agent_state", "workspace": "/tmp/ws",
                "source": "subagent"}}),
        ),
        (
            "user text",
            user_text("hi"),
            json!({"timestamp": TS, "type": "model_msg", "payload":
                {"type": "text", "role": "user", "text": "hi", "stop_reason": "completed"}}),
        ),
        (
            "assistant text failed",
            assistant_text("cut", StopReason::Failed),
            json!({"timestamp": TS, "type": "model_msg", "payload":
                {"type": "text", "role": "assistant", "text": "cut", "stop_reason": "failed"}}),
        ),
        (
            "thinking with fidelity (key order kept)",
            thinking_msg,
            json!({"timestamp": TS, "type": "model_msg", "payload":
                {"type": "thinking", "role": "assistant", "thinking": "hmm", "stop_reason": "completed",
                 "fidelity": {"signature": "sig-1", "zeta": 1, "alpha": 2}}}),
        ),
        (
            "inline_thinking",
            model_msg(ModelPayload::InlineThinking(InlineThinkingPayload {
                role: Role::Assistant,
                data: "AAAA".into(),
                mime_type: "application/octet-stream".into(),
                stop_reason: StopReason::Completed,
                fidelity: Some(Fidelity::new()),
            })),
            json!({"timestamp": TS, "type": "model_msg", "payload":
                {"type": "inline_thinking", "role": "assistant", "data": "AAAA",
                 "mime_type": "application/octet-stream", "stop_reason": "completed"}}),
        ),
        (
            "tool_call",
            tool_call(
                "exec_command",
                "{\"cmd\":\"ls\"}",
                "call_1",
                StopReason::Completed,
            ),
            json!({"timestamp": TS, "type": "model_msg", "payload":
                {"type": "tool_call", "role": "assistant", "name": "exec_command",
                 "arguments": "{\"cmd\":\"ls\"}", "tool_call_id": "call_1", "stop_reason": "completed"}}),
        ),
        (
            "tool_call_output with images",
            tool_call_output(
                "image/png, 67 B",
                "call_1",
                StopReason::Completed,
                Some(vec!["data:image/png;base64,AA==".into()]),
            ),
            json!({"timestamp": TS, "type": "model_msg", "payload":
                {"type": "tool_call_output", "role": "user", "output": "image/png, 67 B",
                 "images": ["data:image/png;base64,AA=="], "tool_call_id": "call_1",
                 "stop_reason": "completed"}}),
        ),
        (
            "image_url",
            user_image_url("https://example.com/a.png"),
            json!({"timestamp": TS, "type": "model_msg", "payload":
                {"type": "image_url", "role": "user", "image_url": "https://example.com/a.png",
                 "stop_reason": "completed"}}),
        ),
        (
            "inline_data",
            model_msg(ModelPayload::InlineData(InlineDataPayload {
                role: Role::User,
                data: "AAAA".into(),
                mime_type: "image/png".into(),
                stop_reason: StopReason::Completed,
                fidelity: None,
            })),
            json!({"timestamp": TS, "type": "model_msg", "payload":
                {"type": "inline_data", "role": "user", "data": "AAAA", "mime_type": "image/png",
                 "stop_reason": "completed"}}),
        ),
        (
            "partial_text delta",
            partial_text(EventType::Delta, "he", StopReason::Completed),
            json!({"timestamp": TS, "type": "model_msg", "payload":
                {"type": "partial_text", "role": "assistant", "event_type": "delta", "text": "he",
                 "stop_reason": "completed"}}),
        ),
        (
            "partial_thinking stop",
            partial_thinking(EventType::Stop, "", StopReason::Aborted),
            json!({"timestamp": TS, "type": "model_msg", "payload":
                {"type": "partial_thinking", "role": "assistant", "event_type": "stop",
                 "thinking": "", "stop_reason": "aborted"}}),
        ),
        (
            "partial_tool_call start",
            partial_tool_call(
                EventType::Start,
                "exec_command",
                "",
                "call_1",
                StopReason::Completed,
            ),
            json!({"timestamp": TS, "type": "model_msg", "payload":
                {"type": "partial_tool_call", "role": "assistant", "event_type": "start",
                 "name": "exec_command", "arguments": "", "tool_call_id": "call_1",
                 "stop_reason": "completed"}}),
        ),
        (
            "partial_tool_call_output images delta",
            partial_tool_call_output(
                EventType::Delta,
                "",
                "call_1",
                StopReason::Completed,
                Some(vec!["data:image/gif;base64,R0lG".into()]),
            ),
            json!({"timestamp": TS, "type": "model_msg", "payload":
                {"type": "partial_tool_call_output", "role": "user", "event_type": "delta",
                 "output": "", "images": ["data:image/gif;base64,R0lG"], "tool_call_id": "call_1",
                 "stop_reason": "completed"}}),
        ),
        (
            "request_begin",
            request_begin(),
            json!({"timestamp": TS, "type": "event_msg", "payload": {"type": "request_begin"}}),
        ),
        (
            "request_end completed",
            request_end(StopReason::Completed, Some("ignored".into()), None, None),
            json!({"timestamp": TS, "type": "event_msg", "payload":
                {"type": "request_end", "status": "completed"}}),
        ),
        (
            "request_end retrying",
            request_end(
                StopReason::Timeout,
                Some("HTTP 503".into()),
                Some(1),
                Some(2000),
            ),
            json!({"timestamp": TS, "type": "event_msg", "payload":
                {"type": "request_end", "status": "timeout", "error_message": "HTTP 503",
                 "attempt": 1, "retry_in_ms": 2000}}),
        ),
        (
            "approval_decision",
            approval_decision(Decision::Deny, "call_1"),
            json!({"timestamp": TS, "type": "event_msg", "payload":
                {"type": "approval_decision", "decision": "deny", "tool_call_id": "call_1"}}),
        ),
        (
            "token_usage",
            token_usage(TokenCounts::new(10, 20, 5), TokenCounts::new(1, 2, 3)),
            json!({"timestamp": TS, "type": "event_msg", "payload": {"type": "token_usage",
                "session": {"cache_read": 10, "cache_write": 20, "output": 5, "total": 35},
                "request": {"cache_read": 1, "cache_write": 2, "output": 3, "total": 6}}}),
        ),
        (
            "compaction_begin",
            event_msg(EventPayload::CompactionBegin(CompactionBeginPayload {
                reason: CompactionReason::Context,
                mode: CompactionMode::Summarize,
                context: 120000,
                turns: 7,
            })),
            json!({"timestamp": TS, "type": "event_msg", "payload": {"type": "compaction_begin",
                "reason": "context", "mode": "summarize", "context": 120000, "turns": 7}}),
        ),
        (
            "compaction_end",
            event_msg(EventPayload::CompactionEnd(CompactionEndPayload {
                reason: CompactionReason::Manual,
                mode: CompactionMode::Discard,
                status: StopReason::Completed,
                attempt: None,
                error_message: None,
            })),
            json!({"timestamp": TS, "type": "event_msg", "payload": {"type": "compaction_end",
                "reason": "manual", "mode": "discard", "status": "completed"}}),
        ),
        (
            "abort",
            abort("aborted by user"),
            json!({"timestamp": TS, "type": "event_msg", "payload":
                {"type": "abort", "reason": "aborted by user"}}),
        ),
        (
            "subagent pointer",
            subagent("session-x"),
            json!({"timestamp": TS, "type": "event_msg", "payload":
                {"type": "subagent", "session_id": "session-x"}}),
        ),
        (
            "origin chain",
            with_origin(with_origin(user_text("x"), "inner"), "outer"),
            json!({"timestamp": TS, "type": "model_msg", "payload":
                {"type": "text", "role": "user", "text": "x", "stop_reason": "completed"},
                "origin": ["outer", "inner"]}),
        ),
    ]
}

#[test]
fn every_payload_serializes_to_the_spec_shape_and_back() {
    for (name, msg, expected) in cases() {
        let msg = at(msg);
        let line = msg.to_json_line();
        // Key order matters: the Python surface compares json.dumps output to trace lines.
        assert_eq!(
            line,
            serde_json::to_string(&expected).unwrap_or_default(),
            "{name}"
        );
        let back: OmniMessage =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{name}: {e}"));
        // Empty fidelity is omitted, so compare the re-serialized form.
        assert_eq!(back.to_json_line(), line, "{name}");
    }
}

#[test]
fn timestamps_are_iso8601_utc_with_millis() {
    let ts = now_timestamp();
    assert_eq!(ts.len(), 24, "{ts}");
    assert!(ts.ends_with('Z'), "{ts}");
    assert!(chrono::DateTime::parse_from_rfc3339(&ts).is_ok(), "{ts}");
}

#[test]
fn missing_stop_reason_defaults_to_completed_and_empty_origin_is_dropped() {
    let line = r#"{"timestamp":"t","type":"model_msg","payload":{"type":"text","role":"user","text":"a"},"origin":[]}"#;
    let msg: OmniMessage = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        msg.model().map(ModelPayload::stop_reason),
        Some(StopReason::Completed)
    );
    assert_eq!(msg.origin, None);
}

#[test]
fn unknown_envelope_fields_and_bad_payloads_are_errors() {
    for bad in [
        r#"{"timestamp":"t","type":"model_msg","payload":{"type":"text","role":"robot","text":"a"}}"#,
        r#"{"timestamp":"t","type":"nope","payload":{}}"#,
        r#"{"timestamp":"t","type":"event_msg","payload":{"type":"abort"},"extra":1}"#,
        r#"{"timestamp":"t","type":"session_meta","payload":{"session_id":"s"}}"#,
    ] {
        assert!(serde_json::from_str::<OmniMessage>(bad).is_err(), "{bad}");
    }
}

#[test]
fn guards_classify_messages() {
    let table: Vec<(OmniMessage, [bool; 5])> = vec![
        // complete, partial, event, meta, traceable
        (user_text("a"), [true, false, false, false, true]),
        (
            partial_text(EventType::Delta, "a", StopReason::Completed),
            [false, true, false, false, false],
        ),
        (request_begin(), [false, false, true, false, true]),
        (
            with_origin(request_begin(), "c"),
            [false, false, true, false, false],
        ),
    ];
    for (msg, want) in table {
        let got = [
            is_complete_model_message(&msg),
            is_partial_payload(&msg),
            is_event_message(&msg),
            is_session_meta(&msg),
            is_traceable(&msg),
        ];
        assert_eq!(got, want, "{}", msg.to_json_line());
    }
}

#[test]
fn aggregator_folds_interleaved_segments() {
    let mut agg = PartialAggregator::new();
    let stream = vec![
        partial_tool_call_output(EventType::Start, "", "a", StopReason::Completed, None),
        partial_tool_call_output(EventType::Start, "", "b", StopReason::Completed, None),
        partial_tool_call_output(EventType::Delta, "he", "a", StopReason::Completed, None),
        partial_tool_call_output(EventType::Delta, "B!", "b", StopReason::Completed, None),
        partial_tool_call_output(EventType::Delta, "llo", "a", StopReason::Completed, None),
        partial_tool_call_output(
            EventType::Delta,
            "",
            "a",
            StopReason::Completed,
            Some(vec!["data:image/png;base64,AA==".into()]),
        ),
        partial_tool_call_output(EventType::Stop, "", "b", StopReason::Failed, None),
        partial_tool_call_output(EventType::Stop, "", "a", StopReason::Completed, None),
        partial_tool_call(
            EventType::Start,
            "exec_command",
            "",
            "c",
            StopReason::Completed,
        ),
        partial_tool_call(
            EventType::Delta,
            "",
            "{\"cmd\":",
            "c",
            StopReason::Completed,
        ),
        partial_tool_call(EventType::Delta, "", "\"ls\"}", "c", StopReason::Completed),
        partial_tool_call(EventType::Stop, "", "", "c", StopReason::Completed),
        partial_text(EventType::Start, "", StopReason::Completed),
        partial_text(EventType::Delta, "ok", StopReason::Completed),
        partial_text(EventType::Stop, "", StopReason::Completed),
    ];
    let done: Vec<ModelPayload> = stream.iter().filter_map(|m| agg.push(m)).collect();
    assert_eq!(agg.open_segments(), 0);
    let expected = vec![
        tool_call_output("B!", "b", StopReason::Failed, None),
        tool_call_output(
            "hello",
            "a",
            StopReason::Completed,
            Some(vec!["data:image/png;base64,AA==".into()]),
        ),
        tool_call(
            "exec_command",
            "{\"cmd\":\"ls\"}",
            "c",
            StopReason::Completed,
        ),
        assistant_text("ok", StopReason::Completed),
    ];
    let expected: Vec<ModelPayload> = expected
        .into_iter()
        .filter_map(|m| m.model().cloned())
        .collect();
    assert_eq!(done, expected);
}

//! Turns provider deltas into the OmniMessage streaming discipline (SPEC §1, §6).
//!
//! Data flow: a protocol decoder calls [`Segments::text`], [`Segments::thinking`],
//! [`Segments::tool_call_start`] / [`Segments::tool_call_args`] as deltas arrive; the first
//! delta of a segment emits its `start`, every delta emits a `delta`, and a type switch (or an
//! explicit [`Segments::close`]) emits `stop` followed at once by the complete message whose
//! content equals the joined deltas. Messages queue in [`Segments::drain`] order for the
//! driver to send. Only one segment is open at a time, so the output keeps the provider's
//! order (thinking → text → tool_call as sent).

use std::collections::VecDeque;

use serde_json::Value;

use crate::protocol::{
    EventType, Fidelity, ModelPayload, OmniMessage, Role, StopReason, ThinkingPayload,
    ToolCallPayload, model_msg, partial_text, partial_thinking, partial_tool_call,
};

/// The kind of the open segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentKind {
    /// Answer text.
    Text,
    /// Reasoning.
    Thinking,
    /// A tool call.
    ToolCall,
}

#[derive(Debug)]
enum Open {
    Text(String),
    Thinking {
        text: String,
        fidelity: Fidelity,
    },
    ToolCall {
        id: String,
        name: String,
        args: String,
    },
}

/// The open segment and the messages not yet sent; see the module docs.
#[derive(Debug, Default)]
pub struct Segments {
    open: Option<Open>,
    pending: VecDeque<OmniMessage>,
    /// Some segment was ever opened (distinguishes an empty answer from content).
    produced: bool,
}

impl Segments {
    /// No open segment, nothing pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// The kind of the open segment, if any.
    pub fn open_kind(&self) -> Option<SegmentKind> {
        self.open.as_ref().map(|o| match o {
            Open::Text(_) => SegmentKind::Text,
            Open::Thinking { .. } => SegmentKind::Thinking,
            Open::ToolCall { .. } => SegmentKind::ToolCall,
        })
    }

    /// Whether any segment was opened during this request.
    pub fn produced_anything(&self) -> bool {
        self.produced
    }

    /// Appends answer text; an empty fragment changes nothing (providers send `content: ""`
    /// next to other deltas, which must not split a thinking segment).
    pub fn text(&mut self, delta: &str) {
        if delta.is_empty() {
            return;
        }
        if self.open_kind() != Some(SegmentKind::Text) {
            self.close(StopReason::Completed);
            self.open = Some(Open::Text(String::new()));
            self.produced = true;
            self.push(partial_text(EventType::Start, "", StopReason::Completed));
        }
        if let Some(Open::Text(buf)) = &mut self.open {
            buf.push_str(delta);
        }
        self.push(partial_text(EventType::Delta, delta, StopReason::Completed));
    }

    /// Opens a thinking segment even before any text (an Anthropic thinking block whose
    /// signature must be kept even if its text is empty). Closes any other open segment.
    pub fn open_thinking(&mut self) {
        if self.open_kind() == Some(SegmentKind::Thinking) {
            return;
        }
        self.close(StopReason::Completed);
        self.open = Some(Open::Thinking {
            text: String::new(),
            fidelity: Fidelity::new(),
        });
        self.produced = true;
        self.push(partial_thinking(
            EventType::Start,
            "",
            StopReason::Completed,
        ));
    }

    /// Appends reasoning; an empty fragment changes nothing.
    pub fn thinking(&mut self, delta: &str) {
        if delta.is_empty() {
            return;
        }
        self.open_thinking();
        if let Some(Open::Thinking { text, .. }) = &mut self.open {
            text.push_str(delta);
        }
        self.push(partial_thinking(
            EventType::Delta,
            delta,
            StopReason::Completed,
        ));
    }

    /// Sets a fidelity entry of the open thinking segment, opening one if needed.
    pub fn thinking_fidelity(&mut self, key: &str, value: Value) {
        self.open_thinking();
        if let Some(Open::Thinking { fidelity, .. }) = &mut self.open {
            fidelity.insert(key.to_owned(), value);
        }
    }

    /// Starts a tool call (closing whatever is open); emits `start` with the name.
    pub fn tool_call_start(&mut self, id: &str, name: &str) {
        self.close(StopReason::Completed);
        self.open = Some(Open::ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            args: String::new(),
        });
        self.produced = true;
        self.push(partial_tool_call(
            EventType::Start,
            name,
            "",
            id,
            StopReason::Completed,
        ));
    }

    /// Appends to the open tool call's arguments. Returns false when no tool call is open.
    pub fn tool_call_args(&mut self, delta: &str) -> bool {
        let Some(Open::ToolCall { id, args, .. }) = &mut self.open else {
            return false;
        };
        if delta.is_empty() {
            return true;
        }
        args.push_str(delta);
        let id = id.clone();
        self.push(partial_tool_call(
            EventType::Delta,
            "",
            delta,
            id,
            StopReason::Completed,
        ));
        true
    }

    /// Adds to the open tool call's name (a provider that streams the name after the id).
    /// The partial `start` already went out, so only the complete message carries the name.
    pub fn tool_call_name(&mut self, more: &str) {
        if let Some(Open::ToolCall { name, .. }) = &mut self.open {
            name.push_str(more);
        }
    }

    /// The open tool call's accumulated arguments.
    pub fn tool_call_arguments(&self) -> Option<&str> {
        match &self.open {
            Some(Open::ToolCall { args, .. }) => Some(args),
            _ => None,
        }
    }

    /// Closes the open segment, if any: `stop` with `stop_reason`, then the complete message
    /// with the same stop reason.
    pub fn close(&mut self, stop_reason: StopReason) {
        let Some(open) = self.open.take() else {
            return;
        };
        match open {
            Open::Text(text) => {
                self.push(partial_text(EventType::Stop, "", stop_reason));
                self.push(crate::protocol::assistant_text(text, stop_reason));
            }
            Open::Thinking { text, fidelity } => {
                self.push(partial_thinking(EventType::Stop, "", stop_reason));
                self.push(model_msg(ModelPayload::Thinking(ThinkingPayload {
                    role: Role::Assistant,
                    thinking: text,
                    stop_reason,
                    fidelity: (!fidelity.is_empty()).then_some(fidelity),
                })));
            }
            Open::ToolCall { id, name, args } => {
                self.push(partial_tool_call(
                    EventType::Stop,
                    "",
                    "",
                    id.clone(),
                    stop_reason,
                ));
                self.push(model_msg(ModelPayload::ToolCall(ToolCallPayload {
                    role: Role::Assistant,
                    name,
                    arguments: args,
                    tool_call_id: id,
                    stop_reason,
                    fidelity: None,
                })));
            }
        }
    }

    /// Takes the next message to send.
    pub fn pop(&mut self) -> Option<OmniMessage> {
        self.pending.pop_front()
    }

    /// Puts a message back at the front (it could not be sent yet).
    pub fn unpop(&mut self, msg: OmniMessage) {
        self.pending.push_front(msg);
    }

    /// Takes every pending message.
    pub fn drain(&mut self) -> impl Iterator<Item = OmniMessage> + '_ {
        self.pending.drain(..)
    }

    fn push(&mut self, msg: OmniMessage) {
        self.pending.push_back(msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Body, PartialAggregator};

    /// (kind, event, content, stop) for partials; (kind, "complete", content, stop) for
    /// complete messages.
    fn shape(msgs: &[OmniMessage]) -> Vec<(String, String, String, StopReason)> {
        msgs.iter()
            .map(|m| {
                let Body::Model(p) = &m.body else {
                    panic!("not a model message")
                };
                let v = serde_json::to_value(p).unwrap();
                let kind = v["type"].as_str().unwrap().to_owned();
                let event = v["event_type"].as_str().unwrap_or("complete").to_owned();
                let content = ["text", "thinking", "arguments"]
                    .iter()
                    .find_map(|k| v[*k].as_str())
                    .unwrap_or("")
                    .to_owned();
                (kind, event, content, p.stop_reason())
            })
            .collect()
    }

    fn row(
        kind: &str,
        event: &str,
        content: &str,
        stop: StopReason,
    ) -> (String, String, String, StopReason) {
        (kind.into(), event.into(), content.into(), stop)
    }

    #[test]
    fn type_switches_close_segments_in_provider_order() {
        use StopReason::*;
        let mut s = Segments::new();
        s.thinking("let me ");
        s.text("");
        s.thinking("think");
        s.text("Hello");
        s.text(" world");
        s.tool_call_start("call_1", "exec_command");
        s.tool_call_args("{\"cmd\":");
        s.tool_call_args("\"ls\"}");
        s.tool_call_start("call_2", "read_image");
        s.tool_call_args("{}");
        s.close(Failed);
        let msgs: Vec<OmniMessage> = s.drain().collect();
        assert_eq!(
            shape(&msgs),
            vec![
                row("partial_thinking", "start", "", Completed),
                row("partial_thinking", "delta", "let me ", Completed),
                row("partial_thinking", "delta", "think", Completed),
                row("partial_thinking", "stop", "", Completed),
                row("thinking", "complete", "let me think", Completed),
                row("partial_text", "start", "", Completed),
                row("partial_text", "delta", "Hello", Completed),
                row("partial_text", "delta", " world", Completed),
                row("partial_text", "stop", "", Completed),
                row("text", "complete", "Hello world", Completed),
                row("partial_tool_call", "start", "", Completed),
                row("partial_tool_call", "delta", "{\"cmd\":", Completed),
                row("partial_tool_call", "delta", "\"ls\"}", Completed),
                row("partial_tool_call", "stop", "", Completed),
                row("tool_call", "complete", "{\"cmd\":\"ls\"}", Completed),
                row("partial_tool_call", "start", "", Completed),
                row("partial_tool_call", "delta", "{}", Completed),
                row("partial_tool_call", "stop", "", Failed),
                row("tool_call", "complete", "{}", Failed),
            ]
        );
        // The aggregator folds the partials back into exactly the complete messages.
        let mut agg = PartialAggregator::new();
        let folded: Vec<ModelPayload> = msgs.iter().filter_map(|m| agg.push(m)).collect();
        let complete: Vec<ModelPayload> = msgs
            .iter()
            .filter_map(|m| m.model().filter(|p| !p.is_partial()).cloned())
            .collect();
        assert_eq!(folded, complete);
    }

    #[test]
    fn tool_call_start_carries_the_name_and_later_partials_do_not() {
        let mut s = Segments::new();
        s.tool_call_start("id-1", "exec_command");
        s.tool_call_args("{}");
        s.close(StopReason::Completed);
        let names: Vec<String> = s
            .drain()
            .filter_map(|m| match m.body {
                Body::Model(ModelPayload::PartialToolCall(p)) => Some(p.name),
                _ => None,
            })
            .collect();
        assert_eq!(names, vec!["exec_command", "", ""]);
    }

    #[test]
    fn signed_empty_thinking_is_kept_with_its_fidelity() {
        let mut s = Segments::new();
        s.open_thinking();
        s.thinking_fidelity("signature", Value::String("sig".into()));
        s.close(StopReason::Completed);
        let last = s.drain().last().unwrap();
        let mut fidelity = Fidelity::new();
        fidelity.insert("signature".into(), Value::String("sig".into()));
        assert_eq!(
            last.model().cloned(),
            Some(ModelPayload::Thinking(ThinkingPayload {
                role: Role::Assistant,
                thinking: String::new(),
                stop_reason: StopReason::Completed,
                fidelity: Some(fidelity),
            }))
        );
    }

    #[test]
    fn closing_nothing_emits_nothing() {
        let mut s = Segments::new();
        s.text("");
        s.thinking("");
        s.close(StopReason::Aborted);
        assert_eq!(s.drain().count(), 0);
        assert!(!s.produced_anything());
        assert!(!s.tool_call_args("x"), "no tool call is open");
    }
}

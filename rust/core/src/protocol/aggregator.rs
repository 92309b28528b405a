//! Folds streamed `partial_*` fragments back into complete messages.
//!
//! Consumers that only want whole messages (a notebook cell, a test, the CLI's compact view)
//! push every message through [`PartialAggregator::push`]; a `stop` fragment yields the
//! complete payload whose text equals the joined deltas. Segments are keyed by kind and, for
//! tool calls and outputs, by `tool_call_id`, so concurrent tool outputs fold independently.

use std::collections::HashMap;

use super::message::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Text,
    Thinking,
    ToolCall,
    ToolCallOutput,
}

#[derive(Default)]
struct Segment {
    name: String,
    content: String,
    images: Option<Vec<String>>,
}

/// Accumulates open segments; see the module docs.
#[derive(Default)]
pub struct PartialAggregator {
    open: HashMap<(Kind, String), Segment>,
}

impl PartialAggregator {
    /// A fresh aggregator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one message. Returns the folded complete payload when `msg` closes a segment.
    /// Non-partial messages pass without effect and return `None`.
    pub fn push(&mut self, msg: &OmniMessage) -> Option<ModelPayload> {
        let Body::Model(payload) = &msg.body else {
            return None;
        };
        let (key, event_type, name, piece, images, stop) = match payload {
            ModelPayload::PartialText(p) => (
                (Kind::Text, String::new()),
                p.event_type,
                "",
                &p.text,
                None,
                p.stop_reason,
            ),
            ModelPayload::PartialThinking(p) => (
                (Kind::Thinking, String::new()),
                p.event_type,
                "",
                &p.thinking,
                None,
                p.stop_reason,
            ),
            ModelPayload::PartialToolCall(p) => (
                (Kind::ToolCall, p.tool_call_id.clone()),
                p.event_type,
                p.name.as_str(),
                &p.arguments,
                None,
                p.stop_reason,
            ),
            ModelPayload::PartialToolCallOutput(p) => (
                (Kind::ToolCallOutput, p.tool_call_id.clone()),
                p.event_type,
                "",
                &p.output,
                p.images.as_ref(),
                p.stop_reason,
            ),
            _ => return None,
        };
        match event_type {
            EventType::Start => {
                let seg = Segment {
                    name: name.to_owned(),
                    content: piece.clone(),
                    images: None,
                };
                self.open.insert(key, seg);
                None
            }
            EventType::Delta => {
                let seg = self.open.entry(key).or_default();
                seg.content.push_str(piece);
                if let Some(imgs) = images {
                    seg.images = Some(imgs.clone());
                }
                None
            }
            EventType::Stop => {
                let (kind, id) = key.clone();
                let mut seg = self.open.remove(&key).unwrap_or_default();
                seg.content.push_str(piece);
                Some(match kind {
                    Kind::Text => ModelPayload::Text(TextPayload {
                        role: Role::Assistant,
                        text: seg.content,
                        stop_reason: stop,
                        fidelity: None,
                    }),
                    Kind::Thinking => ModelPayload::Thinking(ThinkingPayload {
                        role: Role::Assistant,
                        thinking: seg.content,
                        stop_reason: stop,
                        fidelity: None,
                    }),
                    Kind::ToolCall => ModelPayload::ToolCall(ToolCallPayload {
                        role: Role::Assistant,
                        name: seg.name,
                        arguments: seg.content,
                        tool_call_id: id,
                        stop_reason: stop,
                        fidelity: None,
                    }),
                    Kind::ToolCallOutput => ModelPayload::ToolCallOutput(ToolCallOutputPayload {
                        role: Role::User,
                        output: seg.content,
                        images: seg.images,
                        tool_call_id: id,
                        stop_reason: stop,
                    }),
                })
            }
        }
    }

    /// Number of segments started and not yet stopped.
    pub fn open_segments(&self) -> usize {
        self.open.len()
    }
}

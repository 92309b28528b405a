//! Shared request-side preparation of the context for both wire protocols.
//!
//! Data flow: the engine's complete OmniMessages are grouped into alternating turns
//! ([`group_turns`]): an assistant turn gathers consecutive text, thinking and tool calls; a
//! user turn gathers consecutive user text, images and tool outputs. Pairing is repaired on
//! the way, because both providers reject a request whose tool calls and results do not
//! match: a tool output that answers no call of the preceding assistant turn becomes user
//! text, and a call left without an output gets [`MISSING_OUTPUT_TEXT`]. The protocol modules
//! then render turns in their own JSON. Helpers here also strip the engine's `#<n>` id suffix
//! and describe images for models without vision.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::protocol::{
    Body, ModelPayload, OmniMessage, Role, StopReason, TextPayload, ThinkingPayload,
    ToolCallOutputPayload, ToolCallPayload,
};

/// Stands in for the output of a call that has none in the context (both providers require
/// one result per call).
pub const MISSING_OUTPUT_TEXT: &str = "[no output was recorded for this tool call]";

/// One item of an assistant turn.
#[derive(Clone, Copy, Debug)]
pub enum AssistantItem<'a> {
    /// Answer text.
    Text(&'a TextPayload),
    /// Reasoning.
    Thinking(&'a ThinkingPayload),
    /// A tool call.
    ToolCall(&'a ToolCallPayload),
}

/// A tool result paired with a call of the preceding assistant turn.
#[derive(Clone, Debug)]
pub struct ToolResult<'a> {
    /// The engine's id (suffix not yet stripped).
    pub tool_call_id: &'a str,
    /// Model-visible output text.
    pub output: Cow<'a, str>,
    /// Images as data URLs.
    pub images: &'a [String],
    /// How the tool ended.
    pub stop_reason: StopReason,
}

/// One item of a user turn other than a paired tool result.
#[derive(Clone, Debug)]
pub enum UserItem<'a> {
    /// Text (including unpaired tool outputs rendered as text).
    Text(Cow<'a, str>),
    /// An image: web URL, data URL or file path.
    Image(Cow<'a, str>),
}

/// A run of same-role messages.
#[derive(Clone, Debug)]
pub enum Turn<'a> {
    /// Model output.
    Assistant(Vec<AssistantItem<'a>>),
    /// Input: paired tool results first (both providers want them right after the calls),
    /// then everything else in order.
    User {
        /// Results for the preceding assistant turn's calls.
        results: Vec<ToolResult<'a>>,
        /// Text and images.
        items: Vec<UserItem<'a>>,
    },
}

/// Groups complete model messages into alternating turns and repairs call/result pairing.
/// Events, session metadata, partials and opaque inline reasoning are skipped.
pub fn group_turns(messages: &[OmniMessage]) -> Vec<Turn<'_>> {
    let mut turns: Vec<Turn<'_>> = Vec::new();
    for msg in messages {
        let Body::Model(payload) = &msg.body else {
            continue;
        };
        match payload {
            ModelPayload::Text(p) if p.role == Role::Assistant => {
                push_assistant(&mut turns, AssistantItem::Text(p))
            }
            ModelPayload::Thinking(p) => push_assistant(&mut turns, AssistantItem::Thinking(p)),
            ModelPayload::ToolCall(p) => push_assistant(&mut turns, AssistantItem::ToolCall(p)),
            ModelPayload::Text(p) => push_user(&mut turns, UserItem::Text(Cow::Borrowed(&p.text))),
            ModelPayload::ImageUrl(p) => {
                push_user(&mut turns, UserItem::Image(Cow::Borrowed(&p.image_url)))
            }
            ModelPayload::InlineData(p) if p.role == Role::User => {
                let item = if p.mime_type.starts_with("image/") {
                    UserItem::Image(Cow::Owned(format!(
                        "data:{};base64,{}",
                        p.mime_type, p.data
                    )))
                } else {
                    UserItem::Text(Cow::Owned(format!(
                        "[attached file: {}, {}]",
                        p.mime_type,
                        format_size(base64_decoded_len(&p.data))
                    )))
                };
                push_user(&mut turns, item)
            }
            ModelPayload::ToolCallOutput(p) => push_output(&mut turns, p),
            // Opaque reasoning of another protocol, assistant inline data and partials have
            // no representation in these two protocols.
            ModelPayload::InlineThinking(_)
            | ModelPayload::InlineData(_)
            | ModelPayload::PartialText(_)
            | ModelPayload::PartialThinking(_)
            | ModelPayload::PartialToolCall(_)
            | ModelPayload::PartialToolCallOutput(_) => {}
        }
    }
    repair_pairing(&mut turns);
    turns
}

fn push_assistant<'a>(turns: &mut Vec<Turn<'a>>, item: AssistantItem<'a>) {
    match turns.last_mut() {
        Some(Turn::Assistant(items)) => items.push(item),
        _ => turns.push(Turn::Assistant(vec![item])),
    }
}

fn push_user<'a>(turns: &mut Vec<Turn<'a>>, item: UserItem<'a>) {
    match turns.last_mut() {
        Some(Turn::User { items, .. }) => items.push(item),
        _ => turns.push(Turn::User {
            results: Vec::new(),
            items: vec![item],
        }),
    }
}

fn push_output<'a>(turns: &mut Vec<Turn<'a>>, p: &'a ToolCallOutputPayload) {
    let result = ToolResult {
        tool_call_id: &p.tool_call_id,
        output: Cow::Borrowed(&p.output),
        images: p.images.as_deref().unwrap_or(&[]),
        stop_reason: p.stop_reason,
    };
    match turns.last_mut() {
        Some(Turn::User { results, .. }) => results.push(result),
        _ => turns.push(Turn::User {
            results: vec![result],
            items: Vec::new(),
        }),
    }
}

/// The tool-call ids of an assistant turn, in call order.
fn call_ids<'a>(turn: Option<&Turn<'a>>) -> Vec<&'a str> {
    match turn {
        Some(Turn::Assistant(items)) => items
            .iter()
            .filter_map(|it| match *it {
                AssistantItem::ToolCall(c) => Some(c.tool_call_id.as_str()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Unpaired outputs become text; calls without outputs get a stand-in result.
fn repair_pairing<'a>(turns: &mut Vec<Turn<'a>>) {
    for i in 0..turns.len() {
        let prev: HashSet<&'a str> = match i.checked_sub(1) {
            Some(p) => call_ids(turns.get(p)).into_iter().collect(),
            None => HashSet::new(),
        };
        let Some(Turn::User { results, items }) = turns.get_mut(i) else {
            continue;
        };
        let mut seen: HashSet<&str> = HashSet::new();
        let mut orphans = Vec::new();
        results.retain(|r| {
            if prev.contains(r.tool_call_id) && seen.insert(r.tool_call_id) {
                return true;
            }
            orphans.push(UserItem::Text(Cow::Owned(format!(
                "[tool output for call {}]\n{}",
                strip_id_suffix(r.tool_call_id),
                r.output
            ))));
            orphans.extend(
                r.images
                    .iter()
                    .map(|u| UserItem::Image(Cow::Borrowed(u.as_str()))),
            );
            false
        });
        if !orphans.is_empty() {
            orphans.append(items);
            *items = orphans;
        }
    }
    let mut i = 0;
    while i < turns.len() {
        let calls = call_ids(turns.get(i));
        let answered: HashSet<&str> = match turns.get(i + 1) {
            Some(Turn::User { results, .. }) => results.iter().map(|r| r.tool_call_id).collect(),
            _ => HashSet::new(),
        };
        let missing: Vec<&'a str> = calls
            .into_iter()
            .filter(|id| !answered.contains(id))
            .collect();
        if !missing.is_empty() {
            if !matches!(turns.get(i + 1), Some(Turn::User { .. })) {
                turns.insert(
                    i + 1,
                    Turn::User {
                        results: Vec::new(),
                        items: Vec::new(),
                    },
                );
            }
            if let Some(Turn::User { results, .. }) = turns.get_mut(i + 1) {
                results.extend(missing.into_iter().map(|id| ToolResult {
                    tool_call_id: id,
                    output: Cow::Borrowed(MISSING_OUTPUT_TEXT),
                    images: &[],
                    stop_reason: StopReason::Aborted,
                }));
            }
        }
        i += 1;
    }
}

/// The provider's own id: the engine de-duplicates repeated ids as `<id>#<n>`; the suffix is
/// ours and must not reach the provider.
pub fn strip_id_suffix(id: &str) -> &str {
    match id.rsplit_once('#') {
        Some((base, n))
            if !base.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => id,
    }
}

/// A `data:<mime>;base64,<data>` URL split into its parts.
pub fn parse_data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let mime = meta.strip_suffix(";base64")?;
    Some((mime, data))
}

/// True for `http://` and `https://` URLs.
pub fn is_web_url(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// The line a model without vision reads instead of an image (SPEC §6): the path or URL, or
/// for inline data its type and size.
pub fn attached_image_line(image: &str) -> String {
    match parse_data_url(image) {
        Some((mime, data)) => format!(
            "[attached image: inline {mime}, {}]",
            format_size(base64_decoded_len(data))
        ),
        None => format!("[attached image: {image}]"),
    }
}

/// Decoded byte count of a base64 string (padding-aware, no decoding).
fn base64_decoded_len(data: &str) -> usize {
    let trimmed = data.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

/// `<n> B` / `<x.x> kB` / `<x.x> MB`, base 1024 (the image tools' spelling).
fn format_size(bytes: usize) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if b < KIB {
        format!("{bytes} B")
    } else if b < KIB * KIB {
        format!("{:.1} kB", b / KIB)
    } else {
        format!("{:.1} MB", b / (KIB * KIB))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{assistant_text, tool_call, tool_call_output, user_image_url, user_text};

    #[test]
    fn id_suffixes_are_stripped() {
        let cases = [
            ("call_1#2", "call_1"),
            ("call_1#12", "call_1"),
            ("call_1", "call_1"),
            ("a#b", "a#b"),
            ("#3", "#3"),
            ("x#", "x#"),
            ("functions.weather:0#2", "functions.weather:0"),
            ("a#1#2", "a#1"),
        ];
        for (input, want) in cases {
            assert_eq!(strip_id_suffix(input), want, "{input}");
        }
    }

    #[test]
    fn data_urls_and_attachment_lines() {
        assert_eq!(
            parse_data_url("data:image/png;base64,AAAA"),
            Some(("image/png", "AAAA"))
        );
        assert_eq!(parse_data_url("https://x/y.png"), None);
        assert_eq!(
            attached_image_line("data:image/png;base64,AAAA"),
            "[attached image: inline image/png, 3 B]"
        );
        assert_eq!(
            attached_image_line("/work/a.png"),
            "[attached image: /work/a.png]"
        );
        assert!(is_web_url("HTTPS://example.com/a.png"));
        assert!(!is_web_url("/tmp/a.png"));
    }

    fn summary(turns: &[Turn<'_>]) -> Vec<String> {
        turns
            .iter()
            .map(|t| match t {
                Turn::Assistant(items) => format!(
                    "assistant[{}]",
                    items
                        .iter()
                        .map(|i| match i {
                            AssistantItem::Text(p) => format!("text:{}", p.text),
                            AssistantItem::Thinking(p) => format!("thinking:{}", p.thinking),
                            AssistantItem::ToolCall(p) => format!("call:{}", p.tool_call_id),
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                Turn::User { results, items } => format!(
                    "user[{}|{}]",
                    results
                        .iter()
                        .map(|r| format!("{}={}", r.tool_call_id, r.output))
                        .collect::<Vec<_>>()
                        .join(","),
                    items
                        .iter()
                        .map(|i| match i {
                            UserItem::Text(t) => format!("text:{t}"),
                            UserItem::Image(u) => format!("image:{u}"),
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            })
            .collect()
    }

    #[test]
    fn turns_group_and_pairing_is_repaired() {
        let msgs = vec![
            user_text("hi"),
            user_image_url("https://x/a.png"),
            assistant_text("ok", StopReason::Completed),
            tool_call("exec_command", "{}", "c1", StopReason::Completed),
            tool_call("exec_command", "{}", "c2", StopReason::Completed),
            user_text("steer"),
            tool_call_output("out1", "c1", StopReason::Completed, None),
            tool_call_output("stray", "zz", StopReason::Completed, None),
            assistant_text("done", StopReason::Completed),
        ];
        assert_eq!(
            summary(&group_turns(&msgs)),
            vec![
                "user[|text:hi,image:https://x/a.png]".to_owned(),
                "assistant[text:ok,call:c1,call:c2]".to_owned(),
                format!(
                    "user[c1=out1,c2={MISSING_OUTPUT_TEXT}|text:[tool output for call zz]\nstray,text:steer]"
                ),
                "assistant[text:done]".to_owned(),
            ]
        );
    }

    #[test]
    fn a_trailing_unanswered_call_gets_a_stand_in_turn() {
        let msgs = vec![
            user_text("hi"),
            tool_call("exec_command", "{}", "c1#2", StopReason::Completed),
        ];
        assert_eq!(
            summary(&group_turns(&msgs)),
            vec![
                "user[|text:hi]".to_owned(),
                "assistant[call:c1#2]".to_owned(),
                format!("user[c1#2={MISSING_OUTPUT_TEXT}|]"),
            ]
        );
    }
}

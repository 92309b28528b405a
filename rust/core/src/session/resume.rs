//! Session resume (SPEC §4 "Resume"): rebuild the engine state from a trace by positional
//! replay.
//!
//! Rules: a turn's input is the user messages since the previous `request_end`; messages
//! inside a request span (between `request_begin` and its `request_end`) belong to that span.
//! `request_end(completed)` commits the span: its input and the assistant's messages enter the
//! context and its completed tool calls become *committed*. Any other ending drops the span
//! and re-queues its input. A tool output is kept only when it answers a committed call that
//! has no output yet; it then joins the next turn's input. Whatever input is left at the end is
//! the carry-over, and every committed call still unanswered gets the in-memory placeholder
//! `[interrupted: process exited before the tool finished]` (aborted), so the provider always
//! sees each call paired. Token counters and the turn count are restored from the events.

use std::collections::{HashMap, HashSet};

use crate::engine::EngineState;
use crate::protocol::{
    Body, EventPayload, ModelPayload, OmniMessage, Role, SessionMeta, StopReason, TokenCounts,
    tool_call_output,
};

/// Output given to a committed call whose tool never finished before the process exited.
pub const EXITED_PLACEHOLDER: &str = "[interrupted: process exited before the tool finished]";

/// What replay recovered.
#[derive(Debug, Default)]
pub struct Replay {
    /// The first `session_meta` of the file.
    pub meta: Option<SessionMeta>,
    /// The rebuilt engine state.
    pub state: EngineState,
}

fn is_user_input(msg: &OmniMessage) -> bool {
    match msg.model() {
        Some(p) if !p.is_partial() => p.role() == Role::User,
        _ => false,
    }
}

/// Replays the messages of one trace file.
pub fn replay(messages: &[OmniMessage]) -> Replay {
    let mut out = Replay::default();
    let mut context: Vec<OmniMessage> = Vec::new();
    // Input waiting for the next request (user texts, images, kept tool outputs).
    let mut pending: Vec<OmniMessage> = Vec::new();
    // The open span: its input, assistant messages and the outputs seen inside it.
    let mut span: Option<(Vec<OmniMessage>, Vec<OmniMessage>, Vec<OmniMessage>)> = None;
    // Committed calls in order, and which of them have an output.
    let mut committed: Vec<String> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    let mut session_tokens = TokenCounts::default();
    let mut last_total = 0;
    let mut turns = 0;

    let keep_output = |msg: &OmniMessage,
                       committed: &[String],
                       answered: &mut HashSet<String>,
                       pending: &mut Vec<OmniMessage>| {
        if let Some(o) = msg.as_tool_call_output() {
            if committed.contains(&o.tool_call_id) && answered.insert(o.tool_call_id.clone()) {
                pending.push(msg.clone());
            }
        }
    };

    for msg in messages {
        if msg.has_origin() {
            continue;
        }
        match &msg.body {
            Body::SessionMeta(m) => {
                if out.meta.is_none() {
                    out.meta = Some(m.clone());
                }
            }
            Body::Event(EventPayload::RequestBegin {}) => {
                // A begin without an end before it: the earlier span never finished.
                if let Some((input, _, _)) = span.take() {
                    pending.splice(0..0, input);
                }
                span = Some((std::mem::take(&mut pending), Vec::new(), Vec::new()));
            }
            Body::Event(EventPayload::RequestEnd(end)) => {
                let Some((input, assistant, outputs)) = span.take() else {
                    continue;
                };
                if end.status == StopReason::Completed {
                    turns += 1;
                    context.extend(input);
                    for m in &assistant {
                        if let Some(c) = m
                            .as_tool_call()
                            .filter(|c| c.stop_reason == StopReason::Completed)
                        {
                            committed.push(c.tool_call_id.clone());
                        }
                    }
                    context.extend(assistant);
                    for o in &outputs {
                        keep_output(o, &committed, &mut answered, &mut pending);
                    }
                } else {
                    // Dropped: its input goes back in front of anything that arrived since.
                    pending.splice(0..0, input);
                }
            }
            Body::Event(EventPayload::TokenUsage(u)) => {
                session_tokens = u.session;
                last_total = u.request.total;
            }
            Body::Event(_) => {}
            Body::Model(p) if p.is_partial() => {}
            Body::Model(ModelPayload::ToolCallOutput(_)) => match span.as_mut() {
                Some((_, _, outputs)) => outputs.push(msg.clone()),
                None => keep_output(msg, &committed, &mut answered, &mut pending),
            },
            Body::Model(_) if is_user_input(msg) => pending.push(msg.clone()),
            Body::Model(_) => {
                if let Some((_, assistant, _)) = span.as_mut() {
                    assistant.push(msg.clone());
                }
            }
        }
    }
    if let Some((input, _, _)) = span.take() {
        pending.splice(0..0, input);
    }

    // Carry-over: outputs first (they must follow the calls they answer), placeholders for the
    // unanswered committed calls, then the rest of the input.
    let (mut carry, rest): (Vec<OmniMessage>, Vec<OmniMessage>) = pending
        .into_iter()
        .partition(|m| m.as_tool_call_output().is_some());
    for id in &committed {
        if !answered.contains(id) {
            carry.push(tool_call_output(
                EXITED_PLACEHOLDER,
                id.clone(),
                StopReason::Aborted,
                None,
            ));
        }
    }
    let order: HashMap<&str, usize> = committed
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    carry.sort_by_key(|m| {
        m.as_tool_call_output()
            .and_then(|o| order.get(o.tool_call_id.as_str()).copied())
    });
    carry.extend(rest);

    let mut ids: HashMap<String, u32> = HashMap::new();
    for m in &context {
        if let Some(c) = m.as_tool_call() {
            let base = c
                .tool_call_id
                .rsplit_once('#')
                .map_or(c.tool_call_id.as_str(), |(b, _)| b);
            *ids.entry(base.to_owned()).or_insert(0) += 1;
        }
    }
    out.state = EngineState {
        context,
        carry_over: carry,
        session_tokens,
        last_request_total: last_total,
        session_turns: turns,
        tool_call_ids: ids,
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::*;

    fn texts(msgs: &[OmniMessage]) -> Vec<String> {
        msgs.iter()
            .map(|m| match m.model() {
                Some(ModelPayload::Text(t)) => format!("{:?}:{}", t.role, t.text),
                Some(ModelPayload::ToolCall(c)) => format!("call:{}", c.tool_call_id),
                Some(ModelPayload::ToolCallOutput(o)) => {
                    format!("out:{}:{}", o.tool_call_id, o.output)
                }
                other => format!("{other:?}"),
            })
            .collect()
    }

    fn ok_end() -> OmniMessage {
        request_end(StopReason::Completed, None, None, None)
    }

    #[test]
    fn a_killed_task_resumes_with_paired_calls() {
        let trace = vec![
            user_text("task"),
            request_begin(),
            tool_call("exec_command", "{}", "a", StopReason::Completed),
            approval_decision(Decision::Allow, "a"),
            tool_call("exec_command", "{}", "b", StopReason::Completed),
            approval_decision(Decision::Deny, "b"),
            tool_call_output("Tool call denied by user.", "b", StopReason::Aborted, None),
            token_usage(TokenCounts::new(1, 2, 3), TokenCounts::new(1, 2, 3)),
            ok_end(),
            // the process was killed while "a" ran: no output for it
        ];
        let r = replay(&trace);
        assert_eq!(texts(&r.state.context), ["User:task", "call:a", "call:b"]);
        assert_eq!(
            texts(&r.state.carry_over),
            [
                "out:a:[interrupted: process exited before the tool finished]",
                "out:b:Tool call denied by user."
            ]
        );
        assert_eq!(r.state.session_turns, 1);
        assert_eq!(r.state.session_tokens.total, 6);
    }

    #[test]
    fn failed_spans_are_dropped_and_their_input_requeued() {
        let trace = vec![
            user_text("one"),
            request_begin(),
            assistant_text("partial", StopReason::Timeout),
            request_end(StopReason::Timeout, Some("x".into()), Some(1), Some(2000)),
            request_begin(),
            assistant_text("answer", StopReason::Completed),
            ok_end(),
            user_text("two"),
            request_begin(),
            partial_text(EventType::Delta, "cut", StopReason::Completed),
        ];
        let r = replay(&trace);
        assert_eq!(texts(&r.state.context), ["User:one", "Assistant:answer"]);
        assert_eq!(texts(&r.state.carry_over), ["User:two"]);
    }

    #[test]
    fn late_outputs_pair_with_committed_calls_only_once() {
        let trace = vec![
            user_text("go"),
            request_begin(),
            tool_call("t", "{}", "a", StopReason::Completed),
            tool_call("t", "{}", "z", StopReason::Aborted),
            ok_end(),
            tool_call_output("A", "a", StopReason::Completed, None),
            tool_call_output("A again", "a", StopReason::Completed, None),
            tool_call_output("stray", "nope", StopReason::Completed, None),
            request_begin(),
            assistant_text("done", StopReason::Completed),
            ok_end(),
        ];
        let r = replay(&trace);
        assert_eq!(
            texts(&r.state.context),
            ["User:go", "call:a", "call:z", "out:a:A", "Assistant:done"]
        );
        assert!(r.state.carry_over.is_empty());
    }
}

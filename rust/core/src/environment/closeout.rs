//! The pure close-out of one tool call (SPEC §3 "execute_tool never raises", steps 4-7).
//!
//! [`Closeout`] sees every output delta of a tool and how the tool ended, and produces exactly
//! the messages the stream must carry: head-kept deltas up to `maxOutputLength` characters,
//! then one delta with the notes (outside the truncation window), one delta with the images,
//! `stop`, and the complete `tool_call_output` whose text equals the joined deltas. It does no
//! I/O and cannot fail, so every rule is covered by table tests below.

use crate::protocol::{
    EventType, OmniMessage, StopReason, ToolCallOutputPayload, partial_tool_call_output,
    tool_call_output,
};
use crate::tools::ToolResult;

/// Note for a call interrupted by the user.
pub const ABORTED_NOTE: &str = "[interrupted: tool aborted by user]";
/// Output of a call that produced nothing and has no note.
pub const NO_OUTPUT: &str = "[no output]";

/// How a tool call ended, as observed by the Environment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ending {
    /// The user's abort signal was set.
    pub user_aborted: bool,
    /// The tool's timeout fired.
    pub timed_out: bool,
    /// The configured timeout in ms (for the timeout note).
    pub timeout_ms: i64,
    /// The tool returned an error or panicked: its message.
    pub thrown: Option<String>,
    /// What the tool returned, if it returned normally.
    pub result: Option<ToolResult>,
}

/// Close-out state of one call; see the module docs.
#[derive(Debug)]
pub struct Closeout {
    tool_call_id: String,
    /// Cap in characters; `None` = off.
    max_chars: Option<usize>,
    /// The `maxOutputLength` as configured, for the truncation note.
    max_output_length: i64,
    /// Content forwarded so far (at most `max_chars` characters).
    streamed: String,
    streamed_chars: usize,
    /// Some content was dropped past the cap.
    truncated: bool,
}

impl Closeout {
    /// Starts the close-out of `tool_call_id` with the tool's `maxOutputLength` (`<= 0` = off).
    pub fn new(tool_call_id: impl Into<String>, max_output_length: i64) -> Self {
        Closeout {
            tool_call_id: tool_call_id.into(),
            max_chars: usize::try_from(max_output_length).ok().filter(|n| *n > 0),
            max_output_length,
            streamed: String::new(),
            streamed_chars: 0,
            truncated: false,
        }
    }

    /// The `start` fragment.
    pub fn start(&self) -> OmniMessage {
        self.partial(EventType::Start, String::new(), StopReason::Completed, None)
    }

    fn partial(
        &self,
        event_type: EventType,
        output: String,
        stop: StopReason,
        images: Option<Vec<String>>,
    ) -> OmniMessage {
        partial_tool_call_output(event_type, output, self.tool_call_id.clone(), stop, images)
    }

    /// Takes one content delta from the tool; returns the (possibly cut) delta to forward, or
    /// `None` when nothing of it fits. Cuts fall on character boundaries.
    pub fn accept(&mut self, text: &str) -> Option<OmniMessage> {
        if text.is_empty() {
            return None;
        }
        let chunk = match self.max_chars {
            None => text,
            Some(max) => {
                let room = max.saturating_sub(self.streamed_chars);
                if room == 0 {
                    self.truncated = true;
                    return None;
                }
                match text.char_indices().nth(room) {
                    Some((cut, _)) => {
                        self.truncated = true;
                        &text[..cut]
                    }
                    None => text,
                }
            }
        };
        self.streamed_chars += chunk.chars().count();
        self.streamed.push_str(chunk);
        Some(self.partial(
            EventType::Delta,
            chunk.to_owned(),
            StopReason::Completed,
            None,
        ))
    }

    /// Finishes the call: returns the trailing messages (notes delta, images delta, stop,
    /// complete output) and the complete payload.
    pub fn finish(self, ending: Ending) -> (Vec<OmniMessage>, ToolCallOutputPayload) {
        let result = ending.result.clone().unwrap_or_default();
        let self_reported = result.stop_reason;
        let aborted = ending.user_aborted
            || (!ending.timed_out && self_reported == Some(StopReason::Aborted));

        let mut notes: Vec<String> = Vec::new();
        if self.truncated {
            notes.push(format!(
                "[output truncated: exceeded {} chars]",
                self.max_output_length
            ));
        }
        if let Some(note) = result.note.as_ref().filter(|n| !n.is_empty()) {
            notes.push(note.clone());
        }
        let stop = if aborted {
            notes.push(ABORTED_NOTE.to_owned());
            StopReason::Aborted
        } else if ending.timed_out {
            notes.push(format!("[tool timeout: exceeded {}ms]", ending.timeout_ms));
            StopReason::Failed
        } else if let Some(msg) = &ending.thrown {
            notes.push(format!("[tool error] {msg}"));
            StopReason::Failed
        } else {
            self_reported.unwrap_or(StopReason::Completed)
        };
        if self.streamed.is_empty() && notes.is_empty() {
            notes.push(NO_OUTPUT.to_owned());
        }

        let mut out = Vec::with_capacity(4);
        let mut full = self.streamed.clone();
        if !notes.is_empty() {
            let joined = notes.join("\n");
            let suffix = if full.is_empty() {
                joined
            } else {
                format!("\n{joined}")
            };
            full.push_str(&suffix);
            out.push(self.partial(EventType::Delta, suffix, StopReason::Completed, None));
        }
        let images = if stop == StopReason::Completed {
            result.images.filter(|i| !i.is_empty())
        } else {
            None
        };
        if let Some(imgs) = &images {
            out.push(self.partial(
                EventType::Delta,
                String::new(),
                StopReason::Completed,
                Some(imgs.clone()),
            ));
        }
        out.push(self.partial(EventType::Stop, String::new(), stop, None));
        let complete = tool_call_output(full, self.tool_call_id.clone(), stop, images);
        let payload =
            complete
                .as_tool_call_output()
                .cloned()
                .unwrap_or_else(|| ToolCallOutputPayload {
                    role: crate::protocol::Role::User,
                    output: String::new(),
                    images: None,
                    tool_call_id: self.tool_call_id.clone(),
                    stop_reason: stop,
                });
        out.push(complete);
        (out, payload)
    }

    /// A call that fails before its tool runs (unknown tool, bad arguments): one delta with
    /// `message`, `stop(failed)`, the complete failed output. The caller already sent `start`.
    pub fn fail_early(self, message: &str) -> (Vec<OmniMessage>, ToolCallOutputPayload) {
        let delta = self.partial(
            EventType::Delta,
            message.to_owned(),
            StopReason::Completed,
            None,
        );
        let stop = self.partial(EventType::Stop, String::new(), StopReason::Failed, None);
        let payload = ToolCallOutputPayload {
            role: crate::protocol::Role::User,
            output: message.to_owned(),
            images: None,
            tool_call_id: self.tool_call_id.clone(),
            stop_reason: StopReason::Failed,
        };
        let complete = crate::protocol::model_msg(crate::protocol::ModelPayload::ToolCallOutput(
            payload.clone(),
        ));
        (vec![delta, stop, complete], payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ModelPayload, PartialAggregator};

    fn res(
        stop: Option<StopReason>,
        note: Option<&str>,
        images: Option<Vec<&str>>,
    ) -> Option<ToolResult> {
        Some(ToolResult {
            stop_reason: stop,
            note: note.map(str::to_owned),
            images: images.map(|v| v.into_iter().map(str::to_owned).collect()),
        })
    }

    /// Runs a close-out over `deltas` and `ending`, checks the streaming discipline (start,
    /// deltas, one stop, complete; joined deltas == complete), returns the complete payload and
    /// the forwarded content deltas.
    fn run(max: i64, deltas: &[&str], ending: Ending) -> (ToolCallOutputPayload, Vec<String>) {
        let mut c = Closeout::new("call_1", max);
        let mut stream = vec![c.start()];
        let mut forwarded = Vec::new();
        for d in deltas {
            if let Some(m) = c.accept(d) {
                if let Some(ModelPayload::PartialToolCallOutput(p)) = m.model() {
                    forwarded.push(p.output.clone());
                }
                stream.push(m);
            }
        }
        let (tail, payload) = c.finish(ending);
        stream.extend(tail);
        let mut agg = PartialAggregator::new();
        let folded: Vec<ModelPayload> = stream[..stream.len() - 1]
            .iter()
            .filter_map(|m| agg.push(m))
            .collect();
        assert_eq!(folded.len(), 1, "exactly one stop");
        assert_eq!(
            folded[0],
            ModelPayload::ToolCallOutput(payload.clone()),
            "joined deltas == complete"
        );
        assert_eq!(
            stream.last().and_then(OmniMessage::as_tool_call_output),
            Some(&payload)
        );
        (payload, forwarded)
    }

    fn ending() -> Ending {
        Ending {
            timeout_ms: 120_000,
            ..Ending::default()
        }
    }

    #[test]
    fn notes_and_stop_reasons() {
        // (name, deltas, ending, expected output, expected stop)
        let table: Vec<(&str, Vec<&str>, Ending, &str, StopReason)> = vec![
            ("plain", vec!["hi"], ending(), "hi", StopReason::Completed),
            (
                "no output",
                vec![],
                ending(),
                "[no output]",
                StopReason::Completed,
            ),
            (
                "empty deltas are nothing",
                vec!["", ""],
                ending(),
                "[no output]",
                StopReason::Completed,
            ),
            (
                "self note",
                vec!["x"],
                Ending {
                    result: res(Some(StopReason::Failed), Some("[exit code: 2]"), None),
                    ..ending()
                },
                "x\n[exit code: 2]",
                StopReason::Failed,
            ),
            (
                "note without content",
                vec![],
                Ending {
                    result: res(None, Some("[exit code: 1]"), None),
                    ..ending()
                },
                "[exit code: 1]",
                StopReason::Completed,
            ),
            (
                "user abort",
                vec!["part"],
                Ending {
                    user_aborted: true,
                    ..ending()
                },
                "part\n[interrupted: tool aborted by user]",
                StopReason::Aborted,
            ),
            (
                "timeout",
                vec![],
                Ending {
                    timed_out: true,
                    timeout_ms: 5000,
                    ..ending()
                },
                "[tool timeout: exceeded 5000ms]",
                StopReason::Failed,
            ),
            (
                "throw",
                vec!["a"],
                Ending {
                    thrown: Some("boom".into()),
                    ..ending()
                },
                "a\n[tool error] boom",
                StopReason::Failed,
            ),
            (
                "self-reported aborted = abort",
                vec![],
                Ending {
                    result: res(Some(StopReason::Aborted), None, None),
                    ..ending()
                },
                "[interrupted: tool aborted by user]",
                StopReason::Aborted,
            ),
            (
                "self-reported completed",
                vec!["ok"],
                Ending {
                    result: res(
                        Some(StopReason::Completed),
                        Some(
                            "[process running with process_id proc-0a1b2c3d; use input_command to send input or poll for output]",
                        ),
                        None,
                    ),
                    ..ending()
                },
                "ok\n[process running with process_id proc-0a1b2c3d; use input_command to send input or poll for output]",
                StopReason::Completed,
            ),
            // priority pairs
            (
                "abort > timeout",
                vec![],
                Ending {
                    user_aborted: true,
                    timed_out: true,
                    ..ending()
                },
                "[interrupted: tool aborted by user]",
                StopReason::Aborted,
            ),
            (
                "abort > throw",
                vec![],
                Ending {
                    user_aborted: true,
                    thrown: Some("x".into()),
                    ..ending()
                },
                "[interrupted: tool aborted by user]",
                StopReason::Aborted,
            ),
            (
                "abort > self-report",
                vec![],
                Ending {
                    user_aborted: true,
                    result: res(Some(StopReason::Failed), None, None),
                    ..ending()
                },
                "[interrupted: tool aborted by user]",
                StopReason::Aborted,
            ),
            (
                "timeout > throw",
                vec![],
                Ending {
                    timed_out: true,
                    timeout_ms: 10,
                    thrown: Some("x".into()),
                    ..ending()
                },
                "[tool timeout: exceeded 10ms]",
                StopReason::Failed,
            ),
            (
                "timeout > self-report",
                vec![],
                Ending {
                    timed_out: true,
                    timeout_ms: 10,
                    result: res(Some(StopReason::Completed), None, None),
                    ..ending()
                },
                "[tool timeout: exceeded 10ms]",
                StopReason::Failed,
            ),
            (
                "timer fired: self-reported aborted is a timeout",
                vec![],
                Ending {
                    timed_out: true,
                    timeout_ms: 10,
                    result: res(Some(StopReason::Aborted), None, None),
                    ..ending()
                },
                "[tool timeout: exceeded 10ms]",
                StopReason::Failed,
            ),
            (
                "throw > self-report",
                vec![],
                Ending {
                    thrown: Some("bad".into()),
                    result: None,
                    ..ending()
                },
                "[tool error] bad",
                StopReason::Failed,
            ),
            (
                "self note stays with abort",
                vec!["o"],
                Ending {
                    user_aborted: true,
                    result: res(None, Some("[exit code: unknown]"), None),
                    ..ending()
                },
                "o\n[exit code: unknown]\n[interrupted: tool aborted by user]",
                StopReason::Aborted,
            ),
        ];
        for (name, deltas, end, want, stop) in table {
            let (payload, _) = run(16_000, &deltas, end);
            assert_eq!(
                (payload.output.as_str(), payload.stop_reason),
                (want, stop),
                "{name}"
            );
            assert_eq!(payload.images, None, "{name}");
        }
    }

    #[test]
    fn truncation_is_head_kept_on_char_boundaries() {
        // 'é' is 2 bytes, '🐧' is 4 bytes: cuts must never split them.
        let table: Vec<(&str, i64, Vec<&str>, &str)> = vec![
            ("exactly N", 5, vec!["ééééé"], "ééééé"),
            (
                "N+1",
                5,
                vec!["éééééé"],
                "ééééé\n[output truncated: exceeded 5 chars]",
            ),
            (
                "N+1 across deltas",
                5,
                vec!["🐧🐧🐧", "🐧🐧", "🐧"],
                "🐧🐧🐧🐧🐧\n[output truncated: exceeded 5 chars]",
            ),
            (
                "cut inside a delta",
                4,
                vec!["ab", "cdé🐧"],
                "abcd\n[output truncated: exceeded 4 chars]",
            ),
            ("off when <= 0", 0, vec!["🐧🐧🐧"], "🐧🐧🐧"),
            ("off when negative", -1, vec!["abc"], "abc"),
        ];
        for (name, max, deltas, want) in table {
            let (payload, forwarded) = run(max, &deltas, ending());
            assert_eq!(payload.output, want, "{name}");
            if max > 0 {
                let total: usize = forwarded.iter().map(|d| d.chars().count()).sum();
                assert!(total <= max as usize, "{name}: forwarded {total} chars");
            }
        }
    }

    #[test]
    fn notes_survive_truncation_in_order() {
        let big = "x".repeat(20_000);
        let end = Ending {
            user_aborted: true,
            result: res(Some(StopReason::Failed), Some("[exit code: 1]"), None),
            ..ending()
        };
        let (payload, _) = run(16_000, &[&big], end);
        let expected = format!(
            "{}\n[output truncated: exceeded 16000 chars]\n[exit code: 1]\n[interrupted: tool aborted by user]",
            "x".repeat(16_000)
        );
        assert_eq!(payload.output, expected);
        assert_eq!(payload.stop_reason, StopReason::Aborted);
    }

    #[test]
    fn images_come_after_truncation_and_only_when_completed() {
        let img = "data:image/png;base64,iVBORw0KGgo=";
        let (payload, _) = run(
            3,
            &["abcdef"],
            Ending {
                result: res(None, Some("image/png, 8 B"), Some(vec![img])),
                ..ending()
            },
        );
        assert_eq!(
            payload.output,
            "abc\n[output truncated: exceeded 3 chars]\nimage/png, 8 B"
        );
        assert_eq!(payload.images, Some(vec![img.to_owned()]));
        let (failed, _) = run(
            3,
            &[],
            Ending {
                result: res(Some(StopReason::Failed), None, Some(vec![img])),
                ..ending()
            },
        );
        assert_eq!(failed.images, None);
        assert_eq!(failed.output, "[no output]");
        let (empty, _) = run(
            3,
            &[],
            Ending {
                result: res(None, None, Some(vec![])),
                ..ending()
            },
        );
        assert_eq!(empty.images, None);
    }

    #[test]
    fn early_failure_frames_one_delta() {
        let c = Closeout::new("call_9", 16_000);
        let (msgs, payload) = c.fail_early("Unknown tool: nope");
        assert_eq!(msgs.len(), 3);
        assert_eq!(payload.output, "Unknown tool: nope");
        assert_eq!(payload.stop_reason, StopReason::Failed);
        assert_eq!(msgs[2].as_tool_call_output(), Some(&payload));
    }
}

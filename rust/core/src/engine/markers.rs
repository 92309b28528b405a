//! The engine's synthetic `[turn_aborted]` / `[turn_retried]` blocks (SPEC §2 carry-over).
//!
//! When a turn is cut short, what it consumed and produced is transcribed into one user text
//! so the model can continue without re-running tools:
//!
//! ```text
//! [turn_aborted]
//!   [user_input]…[/user_input]
//!   [thinking]…[/thinking]
//!   [text]…[/text]
//!   [tool_call name="N" id="ID"]ARGS[/tool_call]
//!   [tool_call_output id="ID" status="S"]OUT[/tool_call_output]
//! [/turn_aborted]
//! ```
//!
//! An input that is already such a block is unwrapped one level, so blocks never nest.

use crate::protocol::{ModelPayload, OmniMessage};

/// Tag of the user-interruption block.
pub const TURN_ABORTED: &str = "turn_aborted";
/// Tag of the reconnect block.
pub const TURN_RETRIED: &str = "turn_retried";

fn line(tag: &str, attrs: &str, body: &str) -> String {
    format!("  [{tag}{attrs}]{body}[/{tag}]")
}

/// `[user_input]…[/user_input]`.
pub fn user_input_line(text: &str) -> String {
    line("user_input", "", text)
}

/// Transcribes a turn's production: thinking/text segments in order, then tool calls, then
/// tool outputs.
pub fn turn_lines(
    segments: &[OmniMessage],
    tool_calls: &[OmniMessage],
    tool_outputs: &[OmniMessage],
) -> Vec<String> {
    let mut out = Vec::new();
    for seg in segments {
        match seg.model() {
            Some(ModelPayload::Thinking(p)) => out.push(line("thinking", "", &p.thinking)),
            Some(ModelPayload::Text(p)) => out.push(line("text", "", &p.text)),
            _ => {}
        }
    }
    for tc in tool_calls {
        if let Some(p) = tc.as_tool_call() {
            let attrs = format!(" name=\"{}\" id=\"{}\"", p.name, p.tool_call_id);
            out.push(line("tool_call", &attrs, &p.arguments));
        }
    }
    for o in tool_outputs {
        if let Some(p) = o.as_tool_call_output() {
            let attrs = format!(" id=\"{}\" status=\"{}\"", p.tool_call_id, p.stop_reason);
            out.push(line("tool_call_output", &attrs, &p.output));
        }
    }
    out
}

/// Wraps lines in `[tag]` … `[/tag]`, one per line.
pub fn block(tag: &str, lines: &[String]) -> String {
    let mut parts = Vec::with_capacity(lines.len() + 2);
    parts.push(format!("[{tag}]"));
    parts.extend(lines.iter().cloned());
    parts.push(format!("[/{tag}]"));
    parts.join("\n")
}

/// If `text` is a whole `[turn_aborted]` or `[turn_retried]` block (square form, or the legacy
/// `<tag>` form), returns its inner lines (possibly empty); otherwise `None`.
pub fn unwrap_synthetic_block(text: &str) -> Option<&str> {
    for tag in [TURN_ABORTED, TURN_RETRIED] {
        for (open, close) in [
            (format!("[{tag}]"), format!("[/{tag}]")),
            (format!("<{tag}>"), format!("</{tag}>")),
        ] {
            let Some(rest) = text.strip_prefix(open.as_str()) else {
                continue;
            };
            let trimmed = rest.trim_end();
            let Some(inner) = trimmed.strip_suffix(close.as_str()) else {
                continue;
            };
            let inner = inner.strip_prefix('\n').unwrap_or(inner);
            let inner = inner.strip_suffix('\n').unwrap_or(inner);
            return Some(inner);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{StopReason, assistant_text, thinking, tool_call, tool_call_output};

    #[test]
    fn transcribes_a_turn_exactly() {
        let lines = turn_lines(
            &[
                thinking("plan", StopReason::Aborted, None),
                assistant_text("doing", StopReason::Aborted),
            ],
            &[tool_call(
                "exec_command",
                "{\"cmd\":\"ls\"}",
                "c1",
                StopReason::Completed,
            )],
            &[tool_call_output("a\nb", "c1", StopReason::Aborted, None)],
        );
        let mut all = vec![user_input_line("list files")];
        all.extend(lines);
        assert_eq!(
            block(TURN_ABORTED, &all),
            "[turn_aborted]\n  [user_input]list files[/user_input]\n  [thinking]plan[/thinking]\n  [text]doing[/text]\n  [tool_call name=\"exec_command\" id=\"c1\"]{\"cmd\":\"ls\"}[/tool_call]\n  [tool_call_output id=\"c1\" status=\"aborted\"]a\nb[/tool_call_output]\n[/turn_aborted]"
        );
    }

    #[test]
    fn unwraps_one_level_of_either_form() {
        let cases: Vec<(&str, Option<&str>)> = vec![
            (
                "[turn_aborted]\n  [user_input]x[/user_input]\n[/turn_aborted]",
                Some("  [user_input]x[/user_input]"),
            ),
            (
                "[turn_retried]\n  [text]t[/text]\n[/turn_retried]\n",
                Some("  [text]t[/text]"),
            ),
            (
                "<turn_aborted>\n  [text]t[/text]\n</turn_aborted>",
                Some("  [text]t[/text]"),
            ),
            ("[turn_aborted]\n[/turn_aborted]", Some("")),
            ("[turn_aborted]\nunclosed", None),
            ("please [turn_aborted]", None),
            ("[turn_aborted]\nx\n[/turn_retried]", None),
        ];
        for (text, want) in cases {
            assert_eq!(unwrap_synthetic_block(text), want, "{text:?}");
        }
    }
}

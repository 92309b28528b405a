//! Builders for provider-format SSE bodies, so tests script model turns in one line each.

use serde_json::{Value, json};

/// OpenAI Chat Completions stream bodies.
pub mod openai {
    use super::*;

    fn chunk(delta: Value, finish: Option<&str>) -> String {
        let c = json!({
            "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        });
        format!("data: {c}\n\n")
    }

    fn usage(prompt: u64, completion: u64, cached: u64) -> String {
        let c = json!({
            "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
            "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion,
                      "prompt_tokens_details": {"cached_tokens": cached}}
        });
        format!("data: {c}\n\n")
    }

    /// A plain text answer, one delta per word, with usage (10 in / 5 out / 0 cached).
    pub fn text(answer: &str) -> String {
        let mut s = chunk(json!({"role": "assistant", "content": ""}), None);
        for (i, w) in answer.split_inclusive(' ').enumerate() {
            let _ = i;
            s.push_str(&chunk(json!({"content": w}), None));
        }
        s.push_str(&chunk(json!({}), Some("stop")));
        s.push_str(&usage(10, 5, 0));
        s.push_str("data: [DONE]\n\n");
        s
    }

    /// Reasoning (`reasoning_content`) then text.
    pub fn thinking_then_text(thinking: &str, answer: &str) -> String {
        let mut s = chunk(
            json!({"role": "assistant", "reasoning_content": thinking}),
            None,
        );
        s.push_str(&chunk(json!({"content": answer}), None));
        s.push_str(&chunk(json!({}), Some("stop")));
        s.push_str(&usage(10, 5, 0));
        s.push_str("data: [DONE]\n\n");
        s
    }

    /// Tool calls `(id, name, arguments)`, each argument string split into pieces of 7 bytes.
    pub fn tool_calls(calls: &[(&str, &str, &str)]) -> String {
        let mut s = chunk(json!({"role": "assistant", "content": null}), None);
        for (index, (id, name, args)) in calls.iter().enumerate() {
            s.push_str(&chunk(
                json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                        "function": {"name": name, "arguments": ""}}]}),
                None,
            ));
            let bytes: Vec<char> = args.chars().collect();
            for piece in bytes.chunks(7) {
                let piece: String = piece.iter().collect();
                s.push_str(&chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                    None,
                ));
            }
        }
        s.push_str(&chunk(json!({}), Some("tool_calls")));
        s.push_str(&usage(20, 8, 4));
        s.push_str("data: [DONE]\n\n");
        s
    }

    /// One `exec_command` call.
    pub fn exec(id: &str, cmd: &str) -> String {
        tool_calls(&[(id, "exec_command", &json!({"cmd": cmd}).to_string())])
    }
}

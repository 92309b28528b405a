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

/// Anthropic Messages stream bodies (`event: <type>` + `data: <json>`, as the API sends them).
pub mod anthropic {
    use super::*;

    /// Input tokens reported by `message_start` in these bodies.
    pub const INPUT_TOKENS: u64 = 10;
    /// Cache-read input tokens reported by these bodies.
    pub const CACHE_READ_TOKENS: u64 = 3;
    /// Output tokens reported by the final `message_delta`.
    pub const OUTPUT_TOKENS: u64 = 5;

    /// One SSE event.
    pub fn event(data: Value) -> String {
        let kind = data["type"].as_str().unwrap_or("unknown").to_owned();
        format!("event: {kind}\ndata: {data}\n\n")
    }

    /// `message_start` with usage (10 in, 3 cache-read, 1 out so far).
    pub fn message_start() -> String {
        event(json!({"type": "message_start", "message": {
            "id": "msg_test", "type": "message", "role": "assistant", "model": "scripted",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": INPUT_TOKENS, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": CACHE_READ_TOKENS, "output_tokens": 1}}}))
    }

    /// `message_delta` with the stop reason and the final output count, then `message_stop`.
    pub fn message_end(stop_reason: &str) -> String {
        let mut s = event(json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": OUTPUT_TOKENS}}));
        s.push_str(&event(json!({"type": "message_stop"})));
        s
    }

    /// A text block at `index`, one delta per word.
    pub fn text_block(index: u64, text: &str) -> String {
        let mut s = event(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "text", "text": ""}}));
        for w in text.split_inclusive(' ') {
            s.push_str(&event(
                json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "text_delta", "text": w}}),
            ));
        }
        s.push_str(&event(
            json!({"type": "content_block_stop", "index": index}),
        ));
        s
    }

    /// A thinking block with its signature.
    pub fn thinking_block(index: u64, thinking: &str, signature: &str) -> String {
        let mut s = event(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""}}));
        for w in thinking.split_inclusive(' ') {
            s.push_str(&event(
                json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "thinking_delta", "thinking": w}}),
            ));
        }
        s.push_str(&event(
            json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "signature_delta", "signature": signature}}),
        ));
        s.push_str(&event(
            json!({"type": "content_block_stop", "index": index}),
        ));
        s
    }

    /// A `tool_use` block whose input JSON is streamed in pieces of 7 chars.
    pub fn tool_use_block(index: u64, id: &str, name: &str, input: &str) -> String {
        let mut s = event(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
        s.push_str(&event(
            json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "input_json_delta", "partial_json": ""}}),
        ));
        let chars: Vec<char> = input.chars().collect();
        for piece in chars.chunks(7) {
            let piece: String = piece.iter().collect();
            s.push_str(&event(
                json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": piece}}),
            ));
        }
        s.push_str(&event(
            json!({"type": "content_block_stop", "index": index}),
        ));
        s
    }

    /// A plain text answer.
    pub fn text(answer: &str) -> String {
        let mut s = message_start();
        s.push_str(&event(json!({"type": "ping"})));
        s.push_str(&text_block(0, answer));
        s.push_str(&message_end("end_turn"));
        s
    }

    /// Signed thinking, then text.
    pub fn thinking_then_text(thinking: &str, signature: &str, answer: &str) -> String {
        let mut s = message_start();
        s.push_str(&thinking_block(0, thinking, signature));
        s.push_str(&text_block(1, answer));
        s.push_str(&message_end("end_turn"));
        s
    }

    /// Tool calls `(id, name, input JSON)`, optionally after signed thinking.
    pub fn tool_uses(thinking: Option<(&str, &str)>, calls: &[(&str, &str, &str)]) -> String {
        let mut s = message_start();
        let mut index = 0;
        if let Some((t, sig)) = thinking {
            s.push_str(&thinking_block(index, t, sig));
            index += 1;
        }
        for (id, name, input) in calls {
            s.push_str(&tool_use_block(index, id, name, input));
            index += 1;
        }
        s.push_str(&message_end("tool_use"));
        s
    }

    /// An `error` event.
    pub fn error(kind: &str, message: &str) -> String {
        event(json!({"type": "error", "error": {"type": kind, "message": message}}))
    }
}

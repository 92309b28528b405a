//! Recorded real provider streams (the shared SSE fixture folder): each `.sse` body is served
//! verbatim over HTTP to the matching client, and what the client extracts is compared with
//! the sidecar's `expect`. Every mismatch is reported with its fixture name.

use std::path::{Path, PathBuf};
use std::time::Duration;

use penguin_harness_core::config::ClientType;
use penguin_harness_core::llm::ModelRequest;
use penguin_harness_core::llm::anthropic::SIGNATURE_KEY;
use penguin_harness_core::llm::openai::REASONING_FIELD_KEY;
use penguin_harness_core::protocol::{ModelPayload, StopReason, TokenCounts, user_text};
use penguin_harness_tests::llm::{check_discipline, client, completes, entry, run};
use penguin_harness_tests::{Reply, ScriptedServer};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Where the fixtures are: `PENGUIN_SSE_FIXTURES`, else `<workspace>/../shared/fixtures/sse`.
/// `Err` when the variable names a folder that does not exist; `Ok(None)` when the default
/// folder is absent (the test then skips loudly).
fn fixtures_dir() -> Result<Option<PathBuf>, String> {
    if let Some(dir) = std::env::var_os("PENGUIN_SSE_FIXTURES") {
        let dir = PathBuf::from(dir);
        return if dir.is_dir() {
            Ok(Some(dir))
        } else {
            Err(format!(
                "PENGUIN_SSE_FIXTURES={} is not a directory",
                dir.display()
            ))
        };
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = workspace
        .join("..")
        .join("shared")
        .join("fixtures")
        .join("sse");
    Ok(dir.is_dir().then_some(dir))
}

/// The outcome status each error-carrying fixture must end with.
fn expected_error_status(name: &str) -> Option<(StopReason, bool)> {
    match name {
        // overloaded_error: retryable.
        "anthropic_docs_error_event" => Some((StopReason::Timeout, false)),
        // tool_use_failed: a failed generation; a new sample may pass.
        "groq_gpt-oss_error_event_midstream" => Some((StopReason::Failed, false)),
        // {"code": 400, "message": "Token limit reached"} after finish_reason length.
        "openrouter_minimax_reasoning_error_in_chunk" => Some((StopReason::Failed, true)),
        _ => None,
    }
}

fn openai_counts(usage: &Value) -> TokenCounts {
    let n = |p: &str| usage.pointer(p).and_then(Value::as_u64);
    let prompt = n("/prompt_tokens").unwrap_or(0);
    let completion = n("/completion_tokens").unwrap_or(0);
    let cached = n("/prompt_tokens_details/cached_tokens")
        .or(n("/prompt_cache_hit_tokens"))
        .unwrap_or(0);
    // Reasoning reported outside completion_tokens (xAI) shows as total > prompt + completion.
    let output = completion.max(n("/total_tokens").unwrap_or(0).saturating_sub(prompt));
    TokenCounts::new(cached, prompt - cached, output)
}

fn anthropic_counts(usage: &Value) -> TokenCounts {
    let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
    TokenCounts::new(
        n("cache_read_input_tokens"),
        n("input_tokens") + n("cache_creation_input_tokens"),
        n("output_tokens"),
    )
}

/// Counts checked by hand for the fixtures whose normalization is the point.
fn hand_checked_counts(name: &str) -> Option<TokenCounts> {
    match name {
        // 361 prompt (360 cached), 26 completion + 235 reasoning outside it, total 622.
        "xai_grok-4-fast_tool_call_one_chunk" => Some(TokenCounts::new(360, 1, 261)),
        // 339 prompt with 320 cache hits, 83 completion.
        "deepseek_reasoner_tool_call_cached_tokens" => Some(TokenCounts::new(320, 19, 83)),
        // message_delta wins: 6 + 3337 uncached, 6289 cache reads, 198 out.
        "anthropic_sonnet-5_cache_usage_server_tools" => Some(TokenCounts::new(6289, 3343, 198)),
        // vLLM usage on every chunk: the last snapshot, not a sum.
        "vllm_llama31_continuous_usage" => Some(TokenCounts::new(0, 46, 26)),
        _ => None,
    }
}

async fn check_fixture(sse: &Path, sidecar: &Value, anthropic: bool) -> Vec<String> {
    let name = sse
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("?")
        .to_owned();
    let mut problems = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            problems.push(format!("{name}: {what}"));
        }
    };
    let body = match std::fs::read(sse) {
        Ok(b) => b,
        Err(e) => return vec![format!("{name}: cannot read {}: {e}", sse.display())],
    };
    let expect = &sidecar["expect"];
    let server = ScriptedServer::start(vec![Reply::sse_bytes(body)]).await;
    let (kind, url) = if anthropic {
        (ClientType::AnthropicMessages, server.base_url())
    } else {
        (ClientType::OpenAiChat, server.openai_base_url())
    };
    let client = client(&entry(kind, &url), Duration::from_secs(30));
    let input = [user_text("recorded")];
    let request = ModelRequest {
        system_prompt: "",
        messages: &input,
        tools: &[],
        thinking: None,
        max_tokens: None,
    };
    let (msgs, outcome) = run(client.as_ref(), request, CancellationToken::new()).await;
    if let Err(e) = check_discipline(&msgs) {
        check(false, format!("streaming discipline: {e}"));
    }
    let done = completes(&msgs);

    // Text.
    let text: String = done
        .iter()
        .filter_map(|p| match p {
            ModelPayload::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    let want_text = expect["text"].as_str().unwrap_or("");
    check(text == want_text, format!("text {text:?} != {want_text:?}"));

    // Thinking (and what must be kept to replay it).
    let thinking: Vec<_> = done
        .iter()
        .filter_map(|p| match p {
            ModelPayload::Thinking(t) => Some(t),
            _ => None,
        })
        .collect();
    let joined: String = thinking.iter().map(|t| t.thinking.as_str()).collect();
    let want_thinking = if anthropic {
        &expect["thinking"]
    } else {
        &expect["reasoning"]
    };
    match want_thinking.as_str() {
        Some(w) => check(joined == w, format!("thinking {joined:?} != {w:?}")),
        None => check(
            thinking.is_empty(),
            format!("unexpected thinking {joined:?}"),
        ),
    }
    let fid = |t: &&penguin_harness_core::protocol::ThinkingPayload, k: &str| {
        t.fidelity
            .as_ref()
            .and_then(|f| f.get(k))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if anthropic {
        let want_sigs: Vec<String> = expect["content_blocks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["type"] == "thinking")
            .filter_map(|b| b["signature"].as_str().map(str::to_owned))
            .collect();
        let sigs: Vec<String> = thinking
            .iter()
            .filter_map(|t| fid(t, SIGNATURE_KEY))
            .collect();
        check(
            sigs == want_sigs,
            format!("signatures {sigs:?} != {want_sigs:?}"),
        );
    } else if let Some(field) = expect["reasoning_field"].as_str() {
        for t in &thinking {
            let got = fid(t, REASONING_FIELD_KEY);
            check(
                got.as_deref() == Some(field),
                format!("reasoning field {got:?} != {field:?}"),
            );
        }
    }

    // Tool calls: id, name, raw arguments (and the parsed value).
    let calls: Vec<(String, String, String)> = done
        .iter()
        .filter_map(|p| match p {
            ModelPayload::ToolCall(c) => {
                Some((c.tool_call_id.clone(), c.name.clone(), c.arguments.clone()))
            }
            _ => None,
        })
        .collect();
    let args_key = if anthropic { "input_json" } else { "arguments" };
    let parsed_key = if anthropic { "input" } else { "arguments_json" };
    let want_calls: Vec<(String, String, String)> = expect["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["id"].as_str().unwrap_or("").to_owned(),
                c["name"].as_str().unwrap_or("").to_owned(),
                c[args_key].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    check(
        calls == want_calls,
        format!("tool calls {calls:?} != {want_calls:?}"),
    );
    for (got, want) in calls
        .iter()
        .zip(expect["tool_calls"].as_array().into_iter().flatten())
    {
        let parsed: Value = serde_json::from_str(&got.2).unwrap_or(Value::Null);
        check(
            parsed == want[parsed_key],
            format!(
                "arguments of {} parse to {parsed} != {}",
                got.0, want[parsed_key]
            ),
        );
    }

    // Outcome, stop reasons and usage.
    let reason = if anthropic {
        expect["stop_reason"].as_str()
    } else {
        expect["finish_reason"].as_str()
    };
    let (want_status, want_permanent) = match expected_error_status(&name) {
        Some(s) => s,
        None if matches!(reason, Some("length" | "max_tokens")) => (StopReason::Failed, true),
        None => (StopReason::Completed, false),
    };
    check(
        (outcome.status, outcome.permanent) == (want_status, want_permanent),
        format!(
            "outcome {:?}/permanent {} ({:?}) != {want_status:?}/permanent {want_permanent}",
            outcome.status, outcome.permanent, outcome.error_message
        ),
    );
    if let Some(message) = expect["error"]["message"].as_str() {
        let got = outcome.error_message.clone().unwrap_or_default();
        check(
            got.contains(message),
            format!("error message {got:?} lacks {message:?}"),
        );
    }
    if want_status == StopReason::Completed {
        for p in &done {
            check(
                p.stop_reason() == StopReason::Completed,
                format!("message {p:?} not completed"),
            );
        }
        let want_usage = if expect["usage"].is_object() {
            Some(if anthropic {
                anthropic_counts(&expect["usage"])
            } else {
                openai_counts(&expect["usage"])
            })
        } else {
            None
        };
        check(
            outcome.usage == want_usage,
            format!("usage {:?} != {want_usage:?}", outcome.usage),
        );
        if let Some(hand) = hand_checked_counts(&name) {
            check(
                outcome.usage == Some(hand),
                format!("usage {:?} != hand-checked {hand:?}", outcome.usage),
            );
        }
    } else {
        check(outcome.usage.is_none(), "usage on a failed request".into());
        if let Some(last) = done.last() {
            check(
                last.stop_reason() == want_status,
                format!(
                    "last segment stop {:?} != {want_status:?}",
                    last.stop_reason()
                ),
            );
        }
        for p in &done {
            if let ModelPayload::ToolCall(c) = p {
                check(
                    c.stop_reason != StopReason::Completed,
                    format!("tool call {} would be dispatched", c.tool_call_id),
                );
            }
        }
    }
    check(
        server.requests().len() == 1,
        format!("{} requests sent", server.requests().len()),
    );
    problems
}

#[tokio::test]
async fn recorded_provider_streams_match_their_sidecars() {
    let dir = match fixtures_dir() {
        Ok(Some(d)) => d,
        Ok(None) => {
            let default = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("..")
                .join("shared/fixtures/sse");
            println!(
                "SKIPPED: recorded SSE fixtures not found at {}; set PENGUIN_SSE_FIXTURES",
                default.display()
            );
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let mut problems = Vec::new();
    let mut seen = 0;
    for (sub, anthropic) in [("openai_chat", false), ("anthropic_messages", true)] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join(sub))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(sub).display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "sse"))
            .collect();
        files.sort();
        for sse in files {
            let sidecar_path = sse.with_extension("json");
            let sidecar: Value = match std::fs::read_to_string(&sidecar_path)
                .map_err(|e| e.to_string())
                .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
            {
                Ok(v) => v,
                Err(e) => {
                    problems.push(format!("{}: sidecar: {e}", sidecar_path.display()));
                    continue;
                }
            };
            seen += 1;
            problems.extend(check_fixture(&sse, &sidecar, anthropic).await);
        }
    }
    assert!(seen > 0, "no fixtures found in {}", dir.display());
    assert!(
        problems.is_empty(),
        "{} mismatches over {seen} fixtures:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

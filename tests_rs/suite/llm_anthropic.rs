//! The Messages client against the scripted server: answers, tool use, signed thinking
//! replayed in the next request, usage, server-side blocks, byte-level splits and the shape of
//! the request it sends.

use std::time::Duration;

use penguin_harness_core::config::ClientType;
use penguin_harness_core::llm::anthropic::{ANTHROPIC_VERSION, SIGNATURE_KEY};
use penguin_harness_core::llm::{LlmOutcome, ModelRequest, ThinkingLevel};
use penguin_harness_core::protocol::{
    EventType, Fidelity, ModelPayload, OmniMessage, Role, StopReason, TextPayload, ThinkingPayload,
    TokenCounts, ToolCallPayload, ToolSpec, assistant_text, tool_call, tool_call_output,
    user_image_url, user_text,
};
use penguin_harness_tests::llm::{TEST_KEY, check_discipline, client, completes, entry, run};
use penguin_harness_tests::sse::anthropic::{self, event};
use penguin_harness_tests::{Reply, ScriptedServer};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const IDLE: Duration = Duration::from_secs(30);

/// What every scripted body reports: 10 input + 3 cache-read in, 5 out.
fn scripted_usage() -> TokenCounts {
    TokenCounts::new(
        anthropic::CACHE_READ_TOKENS,
        anthropic::INPUT_TOKENS,
        anthropic::OUTPUT_TOKENS,
    )
}

fn request(messages: &[OmniMessage]) -> ModelRequest<'_> {
    ModelRequest {
        system_prompt: "You are a test.",
        messages,
        tools: &[],
        thinking: None,
        max_tokens: None,
    }
}

fn text_msg(text: &str, stop: StopReason) -> ModelPayload {
    ModelPayload::Text(TextPayload {
        role: Role::Assistant,
        text: text.into(),
        stop_reason: stop,
        fidelity: None,
    })
}

fn call_msg(id: &str, name: &str, args: &str, stop: StopReason) -> ModelPayload {
    ModelPayload::ToolCall(ToolCallPayload {
        role: Role::Assistant,
        name: name.into(),
        arguments: args.into(),
        tool_call_id: id.into(),
        stop_reason: stop,
        fidelity: None,
    })
}

fn signed_thinking(text: &str, signature: &str) -> ModelPayload {
    let mut fidelity = Fidelity::new();
    fidelity.insert(SIGNATURE_KEY.into(), json!(signature));
    ModelPayload::Thinking(ThinkingPayload {
        role: Role::Assistant,
        thinking: text.into(),
        stop_reason: StopReason::Completed,
        fidelity: Some(fidelity),
    })
}

async fn one_shot(
    reply: Reply,
    messages: &[OmniMessage],
) -> (Vec<OmniMessage>, LlmOutcome, ScriptedServer) {
    let server = ScriptedServer::start(vec![reply]).await;
    let c = client(
        &entry(ClientType::AnthropicMessages, &server.base_url()),
        IDLE,
    );
    let (msgs, outcome) = run(c.as_ref(), request(messages), CancellationToken::new()).await;
    (msgs, outcome, server)
}

#[tokio::test]
async fn a_text_answer_streams_partials_then_the_complete_text() {
    let input = [user_text("hi")];
    let (msgs, outcome, server) =
        one_shot(Reply::sse(anthropic::text("Hello from Claude")), &input).await;
    assert_eq!(outcome, LlmOutcome::completed(Some(scripted_usage())));
    check_discipline(&msgs).unwrap();
    assert_eq!(
        completes(&msgs),
        vec![text_msg("Hello from Claude", StopReason::Completed)]
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].path, "/v1/messages");
    assert_eq!(reqs[0].header("x-api-key"), Some(TEST_KEY));
    assert_eq!(reqs[0].header("anthropic-version"), Some(ANTHROPIC_VERSION));
    assert_eq!(reqs[0].header("authorization"), None);
    assert_eq!(
        reqs[0].body,
        json!({
            "model": "scripted-model",
            "max_tokens": 8192,
            "system": "You are a test.",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            "stream": true,
        }),
        "no tools and no thinking when none are given; the required max_tokens defaults"
    );
}

#[tokio::test]
async fn tool_use_blocks_become_complete_calls() {
    let calls = [
        ("toolu_1", "exec_command", r#"{"cmd": "echo one"}"#),
        (
            "toolu_2",
            "exec_command",
            r#"{"cmd": "echo two", "workdir": "sub"}"#,
        ),
        ("toolu_3", "read_image", r#"{"source": "a.png"}"#),
    ];
    let input = [user_text("go")];
    let (msgs, outcome, _server) =
        one_shot(Reply::sse(anthropic::tool_uses(None, &calls)), &input).await;
    assert_eq!(outcome, LlmOutcome::completed(Some(scripted_usage())));
    check_discipline(&msgs).unwrap();
    assert_eq!(
        completes(&msgs),
        calls
            .iter()
            .map(|(id, name, args)| call_msg(id, name, args, StopReason::Completed))
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn one_tool_use_without_input_deltas_gets_an_empty_object() {
    let mut body = anthropic::message_start();
    body.push_str(&event(json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "tool_use", "id": "toolu_0", "name": "noop", "input": {}}})));
    body.push_str(&event(json!({"type": "content_block_stop", "index": 0})));
    body.push_str(&anthropic::message_end("tool_use"));
    let input = [user_text("go")];
    let (msgs, outcome, _server) = one_shot(Reply::sse(body), &input).await;
    assert_eq!(outcome.status, StopReason::Completed);
    check_discipline(&msgs).unwrap();
    assert_eq!(
        completes(&msgs),
        vec![call_msg("toolu_0", "noop", "{}", StopReason::Completed)]
    );
}

#[tokio::test]
async fn signed_thinking_is_replayed_in_the_next_request() {
    let server = ScriptedServer::start(vec![
        Reply::sse(anthropic::tool_uses(
            Some(("I should list the files.", "SIG-abc123==")),
            &[("toolu_ls", "exec_command", r#"{"cmd": "ls"}"#)],
        )),
        Reply::sse(anthropic::text("Two files.")),
    ])
    .await;
    let c = client(
        &entry(ClientType::AnthropicMessages, &server.base_url()),
        IDLE,
    );
    let first_input = [user_text("what is here?")];
    let req = ModelRequest {
        thinking: Some(ThinkingLevel::Medium),
        max_tokens: Some(32_000),
        ..request(&first_input)
    };
    let (msgs, outcome) = run(c.as_ref(), req, CancellationToken::new()).await;
    assert_eq!(outcome.status, StopReason::Completed);
    check_discipline(&msgs).unwrap();
    assert_eq!(
        completes(&msgs),
        vec![
            signed_thinking("I should list the files.", "SIG-abc123=="),
            call_msg(
                "toolu_ls",
                "exec_command",
                r#"{"cmd": "ls"}"#,
                StopReason::Completed
            ),
        ]
    );

    // The engine's next context: the prompt, the model's complete output, the tool result.
    let mut history: Vec<OmniMessage> = first_input.to_vec();
    history.extend(
        msgs.iter()
            .filter(|m| m.model().is_some_and(|p| !p.is_partial()))
            .cloned(),
    );
    history.push(tool_call_output(
        "a.txt\nb.txt\n",
        "toolu_ls",
        StopReason::Completed,
        None,
    ));
    let req = ModelRequest {
        thinking: Some(ThinkingLevel::Medium),
        max_tokens: Some(32_000),
        ..request(&history)
    };
    let (_, outcome) = run(c.as_ref(), req, CancellationToken::new()).await;
    assert_eq!(outcome.status, StopReason::Completed);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[0].body["thinking"],
        json!({"type": "enabled", "budget_tokens": 8192})
    );
    assert_eq!(
        reqs[1].body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "what is here?"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I should list the files.", "signature": "SIG-abc123=="},
                {"type": "tool_use", "id": "toolu_ls", "name": "exec_command", "input": {"cmd": "ls"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_ls", "content": "a.txt\nb.txt\n"},
            ]},
        ])
    );
}

#[tokio::test]
async fn thinking_then_text_keeps_provider_order() {
    let input = [user_text("why?")];
    let (msgs, outcome, _server) = one_shot(
        Reply::sse(anthropic::thinking_then_text(
            "Because tests.",
            "SIG",
            "Answer.",
        )),
        &input,
    )
    .await;
    assert_eq!(outcome.status, StopReason::Completed);
    check_discipline(&msgs).unwrap();
    assert_eq!(
        completes(&msgs),
        vec![
            signed_thinking("Because tests.", "SIG"),
            text_msg("Answer.", StopReason::Completed)
        ]
    );
}

#[tokio::test]
async fn server_side_blocks_are_ignored_and_message_delta_usage_wins() {
    let mut body = anthropic::message_start();
    body.push_str(&event(json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}})));
    body.push_str(&event(json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": "{\"query\": \"penguins\"}"}})));
    body.push_str(&event(json!({"type": "content_block_stop", "index": 0})));
    body.push_str(&event(json!({"type": "content_block_start", "index": 1,
        "content_block": {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}})));
    body.push_str(&event(json!({"type": "content_block_stop", "index": 1})));
    body.push_str(&anthropic::text_block(2, "Penguins swim."));
    body.push_str(&event(json!({"type": "message_delta",
        "delta": {"stop_reason": "end_turn"},
        "usage": {"input_tokens": 40, "cache_creation_input_tokens": 7,
                  "cache_read_input_tokens": 100, "output_tokens": 60}})));
    body.push_str(&event(json!({"type": "message_stop"})));
    let input = [user_text("search")];
    let (msgs, outcome, _server) = one_shot(Reply::sse(body), &input).await;
    check_discipline(&msgs).unwrap();
    assert_eq!(
        completes(&msgs),
        vec![text_msg("Penguins swim.", StopReason::Completed)]
    );
    assert_eq!(
        outcome,
        LlmOutcome::completed(Some(TokenCounts::new(100, 47, 60)))
    );
}

#[tokio::test]
async fn split_input_json_and_one_byte_writes_give_the_same_result() {
    let args = r#"{"cmd": "printf 'h\u00e9llo \ud83d\udc27' && ls -la /tmp | head -n 3", "workdir": "sub/dir"}"#;
    let body = anthropic::tool_uses(
        Some(("thinking h\u{e9}llo \u{1f427}", "SIG")),
        &[("toolu_s", "exec_command", args)],
    );
    let input = [user_text("go")];
    let want = vec![
        signed_thinking("thinking h\u{e9}llo \u{1f427}", "SIG"),
        call_msg("toolu_s", "exec_command", args, StopReason::Completed),
    ];
    let (whole, outcome, _s1) = one_shot(Reply::sse(body.clone()), &input).await;
    assert_eq!(outcome.status, StopReason::Completed);
    assert_eq!(completes(&whole), want);
    let (bytewise, outcome, _s2) =
        one_shot(Reply::sse_split(body, 1, Duration::ZERO), &input).await;
    assert_eq!(outcome, LlmOutcome::completed(Some(scripted_usage())));
    check_discipline(&bytewise).unwrap();
    assert_eq!(completes(&bytewise), want);
    let deltas = bytewise
        .iter()
        .filter(|m| {
            matches!(m.model(), Some(ModelPayload::PartialToolCall(p)) if p.event_type == EventType::Delta)
        })
        .count();
    assert!(deltas > 10, "only {deltas} argument deltas");
}

#[tokio::test]
async fn the_request_body_maps_history_tools_and_options() {
    let server = ScriptedServer::start(vec![Reply::sse(anthropic::text("ok"))]).await;
    let c = client(
        &entry(ClientType::AnthropicMessages, &server.base_url()),
        IDLE,
    );
    let history = vec![
        user_text("look at this"),
        user_image_url("data:image/png;base64,iVBORw0KGgo="),
        assistant_text("Running a command.", StopReason::Completed),
        tool_call(
            "exec_command",
            r#"{"cmd":"ls"}"#,
            "toolu_9#2",
            StopReason::Completed,
        ),
        tool_call_output(
            "a.png\n",
            "toolu_9#2",
            StopReason::Completed,
            Some(vec!["data:image/png;base64,AAAA".into()]),
        ),
        user_text("what now?"),
    ];
    let tools = vec![ToolSpec {
        name: "exec_command".into(),
        description: "Run a command.".into(),
        parameters: Some(json!({"type": "object", "properties": {"cmd": {"type": "string"}}})),
    }];
    let req = ModelRequest {
        system_prompt: "SYS",
        messages: &history,
        tools: &tools,
        thinking: Some(ThinkingLevel::Max),
        max_tokens: Some(20_000),
    };
    let (_, outcome) = run(c.as_ref(), req, CancellationToken::new()).await;
    assert_eq!(outcome.status, StopReason::Completed);
    assert_eq!(
        server.requests()[0].body,
        json!({
            "model": "scripted-model",
            "max_tokens": 20000,
            "system": "SYS",
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "look at this"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                ]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Running a command."},
                    {"type": "tool_use", "id": "toolu_9", "name": "exec_command", "input": {"cmd": "ls"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_9", "content": [
                        {"type": "text", "text": "a.png\n"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                    ]},
                    {"type": "text", "text": "what now?"},
                ]},
            ],
            "stream": true,
            "tools": [{"name": "exec_command", "description": "Run a command.",
                       "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}}}],
            // The max budget (65536) clamped to leave 1024 tokens of the 20000 for the answer.
            "thinking": {"type": "enabled", "budget_tokens": 18976},
        })
    );
}

#[tokio::test]
async fn max_tokens_stop_fails_the_last_segment_and_the_request() {
    let mut body = anthropic::message_start();
    body.push_str(&anthropic::text_block(0, "The answer is"));
    body.push_str(&anthropic::message_end("max_tokens"));
    let input = [user_text("hi")];
    let (msgs, outcome, _server) = one_shot(Reply::sse(body), &input).await;
    check_discipline(&msgs).unwrap();
    assert_eq!(
        completes(&msgs),
        vec![text_msg("The answer is", StopReason::Failed)]
    );
    assert_eq!(outcome.status, StopReason::Failed);
    assert!(outcome.permanent);
    assert_eq!(outcome.usage, None);
}

#[tokio::test]
async fn an_error_event_after_content_closes_it_as_retryable() {
    let mut body = anthropic::message_start();
    body.push_str(&event(json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "text", "text": ""}})));
    body.push_str(&event(json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "text_delta", "text": "Half an ans"}})));
    // The padded shape real servers send.
    body.push_str("event: error\ndata: {\"type\":\"error\",\"error\":{\"details\":null,\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}             }\n\n");
    let input = [user_text("hi")];
    let (msgs, outcome, _server) = one_shot(Reply::sse(body), &input).await;
    check_discipline(&msgs).unwrap();
    assert_eq!(
        completes(&msgs),
        vec![text_msg("Half an ans", StopReason::Timeout)]
    );
    assert_eq!(
        outcome,
        LlmOutcome::error(
            StopReason::Timeout,
            "provider error in stream: overloaded_error: Overloaded"
        )
    );
}

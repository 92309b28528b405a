//! The Chat Completions client against the scripted server: answers, tool calls, reasoning,
//! usage, byte-level splits and the shape of the request it sends.

use std::time::Duration;

use penguin_harness_core::config::ClientType;
use penguin_harness_core::llm::openai::REASONING_FIELD_KEY;
use penguin_harness_core::llm::{LlmOutcome, ModelRequest, ThinkingLevel};
use penguin_harness_core::protocol::{
    EventType, Fidelity, ModelPayload, OmniMessage, Role, StopReason, TextPayload, ThinkingPayload,
    TokenCounts, ToolCallPayload, ToolSpec, assistant_text, tool_call, tool_call_output,
    user_image_url, user_text,
};
use penguin_harness_tests::llm::{TEST_KEY, check_discipline, client, completes, entry, run};
use penguin_harness_tests::sse::openai;
use penguin_harness_tests::{Reply, ScriptedServer};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const IDLE: Duration = Duration::from_secs(30);

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

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let c = json!({"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1,
        "model": "scripted", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

/// (type, event_type) of every message, for shape assertions.
fn kinds(msgs: &[OmniMessage]) -> Vec<String> {
    msgs.iter()
        .map(|m| {
            let v = serde_json::to_value(m.model().expect("model message")).expect("json");
            match v["event_type"].as_str() {
                Some(e) => format!("{}:{e}", v["type"].as_str().unwrap_or("?")),
                None => v["type"].as_str().unwrap_or("?").to_owned(),
            }
        })
        .collect()
}

async fn one_shot(
    reply: Reply,
    messages: &[OmniMessage],
) -> (Vec<OmniMessage>, LlmOutcome, ScriptedServer) {
    let server = ScriptedServer::start(vec![reply]).await;
    let c = client(
        &entry(ClientType::OpenAiChat, &server.openai_base_url()),
        IDLE,
    );
    let (msgs, outcome) = run(c.as_ref(), request(messages), CancellationToken::new()).await;
    (msgs, outcome, server)
}

#[tokio::test]
async fn a_text_answer_streams_partials_then_the_complete_text() {
    let input = [user_text("hi")];
    let (msgs, outcome, server) =
        one_shot(Reply::sse(openai::text("Hello from the model")), &input).await;
    assert_eq!(
        outcome,
        LlmOutcome::completed(Some(TokenCounts::new(0, 10, 5)))
    );
    check_discipline(&msgs).unwrap();
    assert_eq!(
        kinds(&msgs),
        vec![
            "partial_text:start",
            "partial_text:delta",
            "partial_text:delta",
            "partial_text:delta",
            "partial_text:delta",
            "partial_text:stop",
            "text"
        ]
    );
    assert_eq!(
        completes(&msgs),
        vec![text_msg("Hello from the model", StopReason::Completed)]
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(
        reqs[0].header("authorization"),
        Some(format!("Bearer {TEST_KEY}").as_str())
    );
    assert_eq!(
        reqs[0].body,
        json!({
            "model": "scripted-model",
            "messages": [
                {"role": "system", "content": "You are a test."},
                {"role": "user", "content": "hi"},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
        }),
        "no tools, no reasoning_effort, no max_tokens when none are given"
    );
}

#[tokio::test]
async fn one_tool_call_is_emitted_complete_with_usage() {
    let input = [user_text("list")];
    let (msgs, outcome, _server) =
        one_shot(Reply::sse(openai::exec("call_1", "ls -la")), &input).await;
    check_discipline(&msgs).unwrap();
    assert_eq!(
        completes(&msgs),
        vec![call_msg(
            "call_1",
            "exec_command",
            r#"{"cmd":"ls -la"}"#,
            StopReason::Completed
        )]
    );
    // 20 prompt tokens of which 4 cached, 8 completion tokens.
    assert_eq!(
        outcome,
        LlmOutcome::completed(Some(TokenCounts::new(4, 16, 8)))
    );
}

#[tokio::test]
async fn three_parallel_calls_each_complete_before_the_next_starts() {
    let calls = [
        ("call_a", "exec_command", r#"{"cmd":"echo one"}"#),
        (
            "call_b",
            "exec_command",
            r#"{"cmd":"echo two","workdir":"sub"}"#,
        ),
        ("call_c", "read_image", r#"{"source":"a.png"}"#),
    ];
    let input = [user_text("go")];
    let (msgs, outcome, _server) = one_shot(Reply::sse(openai::tool_calls(&calls)), &input).await;
    assert_eq!(outcome.status, StopReason::Completed);
    check_discipline(&msgs).unwrap();
    assert_eq!(
        completes(&msgs),
        calls
            .iter()
            .map(|(id, name, args)| call_msg(id, name, args, StopReason::Completed))
            .collect::<Vec<_>>()
    );
    // Each complete call precedes the next call's start.
    let position = |pred: &dyn Fn(&ModelPayload) -> bool| {
        msgs.iter()
            .position(|m| m.model().is_some_and(pred))
            .expect("message present")
    };
    for pair in calls.windows(2) {
        let (done_id, next_id) = (pair[0].0, pair[1].0);
        let done =
            position(&|p| matches!(p, ModelPayload::ToolCall(c) if c.tool_call_id == done_id));
        let next = position(
            &|p| matches!(p, ModelPayload::PartialToolCall(c) if c.tool_call_id == next_id && c.event_type == EventType::Start),
        );
        assert!(
            done < next,
            "{done_id} complete at {done}, {next_id} starts at {next}"
        );
    }
}

#[tokio::test]
async fn a_complete_call_leaves_while_the_stream_is_still_open() {
    // The first call is whole and the second has started; then the server goes silent. The
    // first call must reach the consumer now (approval can start), not at the end.
    let mut body = chunk(json!({"role": "assistant", "content": null}), None);
    body.push_str(&chunk(
        json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"}}]}),
        None,
    ));
    body.push_str(&chunk(
        json!({"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
            "function": {"name": "exec_command", "arguments": "{\"cmd\":"}}]}),
        None,
    ));
    let server = ScriptedServer::start(vec![Reply::stall(body, Duration::from_secs(60))]).await;
    let c = client(
        &entry(ClientType::OpenAiChat, &server.openai_base_url()),
        IDLE,
    );
    let cancel = CancellationToken::new();
    let (tx, mut rx) = mpsc::channel::<OmniMessage>(16);
    let input = [user_text("go")];
    let consumer_cancel = cancel.clone();
    let consumer = async move {
        let mut msgs: Vec<OmniMessage> = Vec::new();
        while let Some(m) = rx.recv().await {
            if m.as_tool_call().is_some_and(|c| c.tool_call_id == "call_1") {
                // The approval would start here; the user then aborts the request.
                consumer_cancel.cancel();
            }
            msgs.push(m);
        }
        msgs
    };
    let producer = async move { c.stream(request(&input), cancel, &tx).await };
    let (outcome, msgs) = tokio::join!(producer, consumer);
    assert_eq!(outcome.status, StopReason::Aborted);
    assert_eq!(outcome.usage, None);
    check_discipline(&msgs).unwrap();
    assert_eq!(
        completes(&msgs),
        vec![
            call_msg(
                "call_1",
                "exec_command",
                r#"{"cmd":"ls"}"#,
                StopReason::Completed
            ),
            call_msg("call_2", "exec_command", r#"{"cmd":"#, StopReason::Aborted),
        ]
    );
}

#[tokio::test]
async fn reasoning_becomes_thinking_and_is_replayed_under_its_field() {
    let input = [user_text("why?")];
    let (msgs, outcome, _server) = one_shot(
        Reply::sse(openai::thinking_then_text("Because of tests.", "Answer.")),
        &input,
    )
    .await;
    assert_eq!(outcome.status, StopReason::Completed);
    check_discipline(&msgs).unwrap();
    let mut fidelity = Fidelity::new();
    fidelity.insert(REASONING_FIELD_KEY.into(), json!("reasoning_content"));
    let done = completes(&msgs);
    assert_eq!(
        done,
        vec![
            ModelPayload::Thinking(ThinkingPayload {
                role: Role::Assistant,
                thinking: "Because of tests.".into(),
                stop_reason: StopReason::Completed,
                fidelity: Some(fidelity),
            }),
            text_msg("Answer.", StopReason::Completed),
        ]
    );

    // The next request carries the reasoning back on the assistant message.
    let server = ScriptedServer::start(vec![Reply::sse(openai::text("ok"))]).await;
    let c = client(
        &entry(ClientType::OpenAiChat, &server.openai_base_url()),
        IDLE,
    );
    let mut history: Vec<OmniMessage> = input.to_vec();
    history.extend(
        msgs.iter()
            .filter(|m| m.model().is_some_and(|p| !p.is_partial()))
            .cloned(),
    );
    history.push(user_text("and then?"));
    let (_, outcome) = run(c.as_ref(), request(&history), CancellationToken::new()).await;
    assert_eq!(outcome.status, StopReason::Completed);
    assert_eq!(
        server.requests()[0].body["messages"],
        json!([
            {"role": "system", "content": "You are a test."},
            {"role": "user", "content": "why?"},
            {"role": "assistant", "content": "Answer.", "reasoning_content": "Because of tests."},
            {"role": "user", "content": "and then?"},
        ])
    );
}

#[tokio::test]
async fn split_arguments_and_one_byte_writes_give_the_same_result() {
    let args = r#"{"cmd":"printf 'h\u00e9llo \u4e16\u754c \ud83d\udc27' && echo \"quoted\" && ls -la /tmp | head -n 3","workdir":"sub/dir"}"#;
    let body = openai::tool_calls(&[("call_split", "exec_command", args)]);
    let input = [user_text("go")];
    let want = vec![call_msg(
        "call_split",
        "exec_command",
        args,
        StopReason::Completed,
    )];

    let (whole, outcome, _s1) = one_shot(Reply::sse(body.clone()), &input).await;
    assert_eq!(outcome.status, StopReason::Completed);
    assert_eq!(completes(&whole), want);

    let (bytewise, outcome, _s2) =
        one_shot(Reply::sse_split(body, 1, Duration::ZERO), &input).await;
    assert_eq!(
        outcome,
        LlmOutcome::completed(Some(TokenCounts::new(4, 16, 8)))
    );
    check_discipline(&bytewise).unwrap();
    assert_eq!(completes(&bytewise), want);
    // The arguments arrived in many deltas (7-char pieces), all of them kept.
    let deltas = bytewise
        .iter()
        .filter(|m| matches!(m.model(), Some(ModelPayload::PartialToolCall(p)) if p.event_type == EventType::Delta))
        .count();
    assert!(deltas > 10, "only {deltas} argument deltas");
}

#[tokio::test]
async fn utf8_text_split_inside_characters_arrives_intact() {
    let answer = "h\u{e9}llo \u{4e16}\u{754c} \u{1f427} done";
    let input = [user_text("hi")];
    let (msgs, outcome, _server) = one_shot(
        Reply::sse_split(openai::text(answer), 1, Duration::ZERO),
        &input,
    )
    .await;
    assert_eq!(outcome.status, StopReason::Completed);
    assert_eq!(
        completes(&msgs),
        vec![text_msg(answer, StopReason::Completed)]
    );
}

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "exec_command".into(),
            description: "Run a command.".into(),
            parameters: Some(
                json!({"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}),
            ),
        },
        ToolSpec {
            name: "noop".into(),
            description: "Nothing.".into(),
            parameters: None,
        },
    ]
}

fn rich_history() -> Vec<OmniMessage> {
    vec![
        user_text("look at this"),
        user_image_url("data:image/png;base64,iVBORw0KGgo="),
        assistant_text("Running a command.", StopReason::Completed),
        tool_call(
            "exec_command",
            r#"{"cmd":"ls"}"#,
            "call_9#2",
            StopReason::Completed,
        ),
        tool_call_output(
            "a.png\n",
            "call_9#2",
            StopReason::Completed,
            Some(vec!["data:image/png;base64,AAAA".into()]),
        ),
        user_text("what now?"),
    ]
}

#[tokio::test]
async fn the_request_body_maps_history_tools_and_options() {
    let server = ScriptedServer::start(vec![Reply::sse(openai::text("ok"))]).await;
    let c = client(
        &entry(ClientType::OpenAiChat, &server.openai_base_url()),
        IDLE,
    );
    let history = rich_history();
    let tools = tools();
    let req = ModelRequest {
        system_prompt: "SYS",
        messages: &history,
        tools: &tools,
        thinking: Some(ThinkingLevel::Max),
        max_tokens: Some(1000),
    };
    let (_, outcome) = run(c.as_ref(), req, CancellationToken::new()).await;
    assert_eq!(outcome.status, StopReason::Completed);
    assert_eq!(
        server.requests()[0].body,
        json!({
            "model": "scripted-model",
            "messages": [
                {"role": "system", "content": "SYS"},
                {"role": "user", "content": [
                    {"type": "text", "text": "look at this"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                ]},
                {"role": "assistant", "content": "Running a command.", "tool_calls": [
                    {"id": "call_9", "type": "function", "function": {"name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_9", "content": "a.png\n"},
                {"role": "user", "content": [
                    {"type": "text", "text": "[images from tool call call_9]"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    {"type": "text", "text": "what now?"},
                ]},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "tools": [
                {"type": "function", "function": {"name": "exec_command", "description": "Run a command.",
                    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}},
                {"type": "function", "function": {"name": "noop", "description": "Nothing.",
                    "parameters": {"type": "object", "properties": {}}}},
            ],
            "reasoning_effort": "high",
            "max_tokens": 1000,
        })
    );
}

#[tokio::test]
async fn a_model_without_vision_reads_attachment_lines() {
    let server = ScriptedServer::start(vec![Reply::sse(openai::text("ok"))]).await;
    let mut e = entry(ClientType::OpenAiChat, &server.openai_base_url());
    e.vision = false;
    let c = client(&e, IDLE);
    let history = rich_history();
    let (_, outcome) = run(c.as_ref(), request(&history), CancellationToken::new()).await;
    assert_eq!(outcome.status, StopReason::Completed);
    let messages = &server.requests()[0].body["messages"];
    assert_eq!(
        messages[1],
        json!({"role": "user", "content": "look at this\n\n[attached image: inline image/png, 8 B]"})
    );
    assert_eq!(
        messages[4],
        json!({"role": "user", "content": "[images from tool call call_9]\n\n[attached image: inline image/png, 3 B]\n\nwhat now?"})
    );
}

#[tokio::test]
async fn finish_reason_length_fails_the_last_segment_and_the_request() {
    let mut body = chunk(json!({"role": "assistant", "content": ""}), None);
    body.push_str(&chunk(json!({"content": "The answer is"}), None));
    body.push_str(&chunk(json!({}), Some("length")));
    body.push_str("data: [DONE]\n\n");
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
    assert!(
        outcome
            .error_message
            .as_deref()
            .is_some_and(|m| m.contains("output token limit")),
        "{outcome:?}"
    );
}

//! The agent loop end to end: real HTTP model clients against the scripted server, real
//! `exec_command` processes, the trace file on disk.

use std::sync::Arc;
use std::time::Duration;

use penguin_harness_core::approval::{ApprovalError, Approver, Decision, FixedApprover};
use penguin_harness_core::config::ClientType;
use penguin_harness_core::protocol::{EventPayload, OmniMessage, TokenCounts, user_text};
use penguin_harness_tests::agent::{
    TestAgent, assert_trace_is_stream, kinds, output_of, run_task, run_with, system_yaml, trace_of,
};
use penguin_harness_tests::sse::openai;
use penguin_harness_tests::{Reply, ScriptedServer};
use serde_json::Value;

fn allow() -> Option<Arc<dyn Approver>> {
    Some(Arc::new(FixedApprover(Decision::Allow)))
}

/// The OpenAI-format messages of the n-th request the server received.
fn request_messages(server: &ScriptedServer, n: usize) -> Vec<Value> {
    let reqs = server.requests();
    let body = &reqs
        .get(n)
        .unwrap_or_else(|| panic!("request {n} missing; got {}", reqs.len()))
        .body;
    body["messages"].as_array().cloned().unwrap_or_default()
}

/// `(tool_call_id, content)` of the `tool` messages of a request, in order.
fn tool_messages(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            let content = match &m["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (
                m["tool_call_id"].as_str().unwrap_or_default().to_owned(),
                content,
            )
        })
        .collect()
}

/// The text of the last user message of a request.
fn last_user_text(messages: &[Value]) -> String {
    let m = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .cloned()
        .unwrap_or_default();
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

#[tokio::test]
async fn a_text_answer_streams_and_the_trace_is_the_stream_minus_partials() {
    let server = ScriptedServer::start(vec![Reply::sse(openai::text("Hello there"))]).await;
    let t = TestAgent::new();
    let session = t.session(ClientType::OpenAiChat, &server.openai_base_url());
    let prompt = user_text("hi");
    let stream = run_with(&session, vec![prompt.clone()], None).await;
    assert_eq!(
        kinds(&stream),
        [
            "meta",
            "begin",
            "text:Hello there",
            "usage",
            "end:completed"
        ]
    );
    // session_meta, then the prompt (traced, never echoed), then the rest of the stream.
    assert_trace_is_stream(&session, &[stream[0].clone(), prompt], &stream[1..]);
    let usage = stream.iter().find_map(|m| match m.event() {
        Some(EventPayload::TokenUsage(u)) => Some(u.clone()),
        _ => None,
    });
    assert_eq!(usage.map(|u| u.request), Some(TokenCounts::new(0, 10, 5)));
    // The system prompt went first; the key went in the header only.
    let msgs = request_messages(&server, 0);
    assert_eq!(msgs[0]["role"], "system");
    assert!(
        msgs[0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains(&t.workspace.path().display().to_string())
    );
    let req = &server.requests()[0];
    assert_eq!(req.header("authorization"), Some("Bearer sk-test-secret"));
    let trace_text = std::fs::read_to_string(session.trace_path()).unwrap_or_default();
    assert!(!trace_text.contains("sk-test-secret"));
}

#[tokio::test]
async fn one_tool_call_runs_and_its_output_is_fed_back() {
    let server = ScriptedServer::start(vec![
        Reply::sse(openai::exec("call_1", "echo hello from bash")),
        Reply::sse(openai::text("done")),
    ])
    .await;
    let t = TestAgent::new();
    let session = t.session(ClientType::OpenAiChat, &server.openai_base_url());
    let stream = run_task(&session, "say hello", allow()).await;
    assert_eq!(
        kinds(&stream),
        [
            "meta",
            "begin",
            "call:call_1",
            "decide:call_1:allow",
            "usage",
            "end:completed",
            "out:call_1:completed",
            "begin",
            "text:done",
            "usage",
            "end:completed"
        ]
    );
    assert_eq!(
        output_of(&stream, "call_1").as_deref(),
        Some("hello from bash\n")
    );
    let second = request_messages(&server, 1);
    assert_eq!(
        tool_messages(&second),
        [("call_1".to_owned(), "hello from bash\n".to_owned())]
    );
    // The assistant turn with the call precedes it, with the arguments as sent.
    let assistant = second
        .iter()
        .find(|m| m["role"] == "assistant")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        assistant["tool_calls"][0]["function"]["name"],
        "exec_command"
    );
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"],
        "{\"cmd\":\"echo hello from bash\"}"
    );
}

#[tokio::test]
async fn parallel_calls_finish_out_of_order_and_are_fed_back_in_call_order() {
    let calls = [
        (
            "call_a",
            "exec_command",
            r#"{"cmd":"until [ -e c.done ]; do sleep 0.05; done; sleep 0.3; echo A"}"#,
        ),
        (
            "call_b",
            "exec_command",
            r#"{"cmd":"echo B; touch b.done"}"#,
        ),
        (
            "call_c",
            "exec_command",
            r#"{"cmd":"until [ -e b.done ]; do sleep 0.05; done; sleep 0.3; echo C; touch c.done"}"#,
        ),
    ];
    let server = ScriptedServer::start(vec![
        Reply::sse(openai::tool_calls(&calls)),
        Reply::sse(openai::text("ok")),
    ])
    .await;
    let t = TestAgent::new();
    let session = t.session(ClientType::OpenAiChat, &server.openai_base_url());
    let stream = run_task(&session, "three things", allow()).await;
    let outs: Vec<String> = kinds(&stream)
        .into_iter()
        .filter(|k| k.starts_with("out:"))
        .collect();
    assert_eq!(
        outs,
        [
            "out:call_b:completed",
            "out:call_c:completed",
            "out:call_a:completed"
        ]
    );
    assert_eq!(
        tool_messages(&request_messages(&server, 1)),
        [
            ("call_a".into(), "A\n".into()),
            ("call_b".into(), "B\n".into()),
            ("call_c".into(), "C\n".into())
        ]
    );
    // Exactly one decision per call, in call order, in the trace.
    let decisions: Vec<String> = kinds(&trace_of(&session))
        .into_iter()
        .filter(|k| k.starts_with("decide:"))
        .collect();
    assert_eq!(
        decisions,
        [
            "decide:call_a:allow",
            "decide:call_b:allow",
            "decide:call_c:allow"
        ]
    );
    assert_trace_is_stream(
        &session,
        &[stream[0].clone(), trace_of(&session)[1].clone()],
        &stream[1..],
    );
}

struct Raising;

#[async_trait::async_trait]
impl Approver for Raising {
    async fn approve(&self, _: &OmniMessage) -> Result<Decision, ApprovalError> {
        Err(ApprovalError::new(
            "RuntimeError: policy service unreachable",
        ))
    }
}

#[tokio::test]
async fn denied_unapproved_and_failing_approvals_feed_back_the_denial() {
    type Case = (
        &'static str,
        Option<Arc<dyn Approver>>,
        Option<&'static str>,
    );
    let cases: Vec<Case> = vec![
        ("deny", Some(Arc::new(FixedApprover(Decision::Deny))), None),
        ("no callback", None, None),
        (
            "raising",
            Some(Arc::new(Raising)),
            Some("approval callback failed: RuntimeError: policy service unreachable"),
        ),
    ];
    for (name, approver, why) in cases {
        let server = ScriptedServer::start(vec![
            Reply::sse(openai::exec("call_1", "touch should-not-exist")),
            Reply::sse(openai::text("understood")),
        ])
        .await;
        let t = TestAgent::new();
        let session = t.session(ClientType::OpenAiChat, &server.openai_base_url());
        let stream = run_task(&session, "try it", approver).await;
        assert!(
            kinds(&stream).contains(&"decide:call_1:deny".to_owned()),
            "{name}"
        );
        assert_eq!(
            output_of(&stream, "call_1").as_deref(),
            Some("Tool call denied by user."),
            "{name}"
        );
        assert!(
            !t.workspace.path().join("should-not-exist").exists(),
            "{name}: the command never ran"
        );
        assert_eq!(
            tool_messages(&request_messages(&server, 1)),
            [("call_1".into(), "Tool call denied by user.".into())],
            "{name}"
        );
        let decision = trace_of(&session)
            .into_iter()
            .find_map(|m| match m.event() {
                Some(EventPayload::ApprovalDecision(d)) => Some(d.clone()),
                _ => None,
            });
        assert_eq!(
            decision.and_then(|d| d.error_message).as_deref(),
            why,
            "{name}"
        );
    }
}

#[tokio::test]
async fn http_500_is_retried_and_a_cut_stream_is_retried_without_rerunning_tools() {
    // Request 1: call_1 completes (call_2 starts), then the connection drops in the middle of
    // call_2's arguments: call_1 runs, call_2 is never dispatched, the outcome is malformed.
    let body = openai::tool_calls(&[
        (
            "call_1",
            "exec_command",
            r#"{"cmd":"echo ran >> runs.txt; echo ran"}"#,
        ),
        (
            "call_2",
            "exec_command",
            r#"{"cmd":"echo never >> runs.txt"}"#,
        ),
    ]);
    let start2 = body
        .find("\"call_2\"")
        .unwrap_or_else(|| panic!("no call_2 in {body}"));
    let after_start = start2 + body[start2..].find("\n\n").unwrap_or(0) + 2;
    let cut = after_start + body[after_start..].find("\n\n").unwrap_or(0) + 2;
    let server = ScriptedServer::start(vec![
        Reply::sse(body[..cut].to_owned()),
        Reply::status(
            500,
            r#"{"error":{"message":"upstream exploded","type":"server_error"}}"#,
        ),
        Reply::sse(openai::text("recovered")),
    ])
    .await;
    let t = TestAgent::new();
    let session = t.session(ClientType::OpenAiChat, &server.openai_base_url());
    let stream = run_task(&session, "go", allow()).await;
    let ends: Vec<String> = kinds(&stream)
        .into_iter()
        .filter(|k| k.starts_with("end:"))
        .collect();
    assert_eq!(
        ends,
        [
            "end:malformed:a1:r5",
            "end:timeout:a2:r10",
            "end:completed:a3"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(t.workspace.path().join("runs.txt")).unwrap_or_default(),
        "ran\n"
    );
    // The retry resends the prompt with the transcript appended (merged into one user turn).
    let retried = last_user_text(&request_messages(&server, 1));
    assert_eq!(
        retried,
        "go\n\n[turn_retried]\n  [tool_call name=\"exec_command\" id=\"call_1\"]{\"cmd\":\"echo ran >> runs.txt; echo ran\"}[/tool_call]\n  [tool_call_output id=\"call_1\" status=\"completed\"]ran\n[/tool_call_output]\n[/turn_retried]"
    );
    // The third request carries the same single transcript, not two.
    assert_eq!(
        last_user_text(&request_messages(&server, 2))
            .matches("[turn_retried]")
            .count(),
        1
    );
    assert_eq!(
        kinds(&stream).last().map(String::as_str),
        Some("end:completed:a3")
    );
}

#[tokio::test]
async fn auth_errors_abort_at_once_and_retries_run_out() {
    let server = ScriptedServer::start(vec![Reply::status(
        401,
        r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#,
    )])
    .await;
    let t = TestAgent::new();
    let session = t.session(ClientType::OpenAiChat, &server.openai_base_url());
    let stream = run_task(&session, "go", None).await;
    let k = kinds(&stream);
    assert_eq!(k[1..3], ["begin".to_owned(), "end:auth:a1".to_owned()]);
    assert!(k[3].starts_with("abort:llm request error: "), "{k:?}");
    assert_eq!(k.len(), 4);
    assert_eq!(server.requests().len(), 1, "auth is never retried");
    assert!(!k[3].contains("sk-test-secret"));

    let server = ScriptedServer::start(vec![
        Reply::status(503, "{}"),
        Reply::status(503, "{}"),
        Reply::status(503, "{}"),
    ])
    .await;
    let session = t.session(ClientType::OpenAiChat, &server.openai_base_url());
    let stream = run_task(&session, "go", None).await;
    assert_eq!(
        kinds(&stream)[1..],
        [
            "begin",
            "end:timeout:a1:r5",
            "begin",
            "end:timeout:a2:r10",
            "begin",
            "end:timeout:a3",
            "abort:reconnect failed after 2 retries"
        ]
    );
}

#[tokio::test]
async fn an_idle_stream_times_out_and_is_retried() {
    let body = openai::text("slow answer");
    let server = ScriptedServer::start(vec![
        Reply::Stall {
            chunks: vec![penguin_harness_tests::model_server::Chunk {
                delay: Duration::ZERO,
                bytes: body.as_bytes()[..40].to_vec(),
            }],
            stall: Duration::from_secs(5),
        },
        Reply::sse(body),
    ])
    .await;
    let t = TestAgent::with_config(&system_yaml(-1, 300));
    let session = t.session(ClientType::OpenAiChat, &server.openai_base_url());
    let stream = run_task(&session, "go", None).await;
    let ends: Vec<String> = kinds(&stream)
        .into_iter()
        .filter(|k| k.starts_with("end:"))
        .collect();
    assert_eq!(ends, ["end:timeout:a1:r5", "end:completed:a2"]);
}

#[tokio::test]
async fn abort_while_streaming_carries_a_turn_aborted_block_into_the_next_run() {
    let body = openai::text("one two three four five six seven eight");
    let server = ScriptedServer::start(vec![
        Reply::sse_split(body, 80, Duration::from_millis(150)),
        Reply::sse(openai::text("continuing")),
    ])
    .await;
    let t = TestAgent::new();
    let session = t.session(ClientType::OpenAiChat, &server.openai_base_url());
    let mut handle = session
        .run(
            vec![user_text("count")],
            penguin_harness_core::engine::RunOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let mut stream = Vec::new();
    while let Some(m) = handle.next().await {
        let first_text = m.model().is_some_and(|p| matches!(p, penguin_harness_core::protocol::ModelPayload::PartialText(x) if !x.text.is_empty()));
        stream.push(m);
        if first_text {
            handle.abort();
        }
    }
    assert_eq!(
        kinds(&stream).last().map(String::as_str),
        Some("abort:aborted by user")
    );
    let next = run_task(&session, "go on", None).await;
    assert_eq!(
        kinds(&next).last().map(String::as_str),
        Some("end:completed")
    );
    // One user turn: the carried block, then the new prompt (the client merges same-role input).
    let msgs = request_messages(&server, 1);
    let users: Vec<&Value> = msgs.iter().filter(|m| m["role"] == "user").collect();
    assert_eq!(users.len(), 1, "{msgs:?}");
    let sent = users[0]["content"].as_str().unwrap_or_default();
    let (carried, prompt) = sent.split_once("\n\n").unwrap_or_default();
    assert!(
        carried.starts_with("[turn_aborted]\n  [user_input]count[/user_input]\n  [text]one "),
        "{carried}"
    );
    assert!(carried.ends_with("[/text]\n[/turn_aborted]"), "{carried}");
    assert_eq!(prompt, "go on");
    // Carry-over is model-only: the trace holds the real messages, never the block.
    assert!(
        !std::fs::read_to_string(session.trace_path())
            .unwrap_or_default()
            .contains("[turn_aborted]")
    );
}

#[tokio::test]
async fn abort_while_a_tool_runs_kills_it_and_carries_its_output() {
    let server = ScriptedServer::start(vec![
        Reply::sse(openai::exec("call_1", "echo $$ > pid.txt; sleep 30")),
        Reply::sse(openai::text("ok")),
    ])
    .await;
    let t = TestAgent::new();
    let session = t.session(ClientType::OpenAiChat, &server.openai_base_url());
    let mut handle = session
        .run(
            vec![user_text("wait")],
            penguin_harness_core::engine::RunOptions {
                approver: allow(),
                thinking: None,
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let pid_file = t.workspace.path().join("pid.txt");
    let mut stream = Vec::new();
    let mut aborted = false;
    loop {
        tokio::select! {
            m = handle.next() => match m { Some(m) => stream.push(m), None => break },
            _ = tokio::time::sleep(Duration::from_millis(50)), if !aborted => {
                if std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n')) {
                    handle.abort();
                    aborted = true;
                }
            }
        }
    }
    assert_eq!(
        output_of(&stream, "call_1").as_deref(),
        Some("[interrupted: tool aborted by user]")
    );
    assert_eq!(
        kinds(&stream).last().map(String::as_str),
        Some("abort:aborted by user")
    );
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or(0);
    assert!(pid > 0);
    assert!(
        penguin_harness_tests::process_gone(pid).await,
        "the command's shell {pid} must be gone"
    );
    let _ = run_task(&session, "and now?", None).await;
    let msgs = request_messages(&server, 1);
    assert_eq!(
        tool_messages(&msgs),
        [(
            "call_1".into(),
            "[interrupted: tool aborted by user]".into()
        )]
    );
    assert_eq!(last_user_text(&msgs), "and now?");
}

#[tokio::test]
async fn the_anthropic_loop_replays_signed_thinking_and_feeds_parallel_results_in_call_order() {
    use penguin_harness_tests::sse::anthropic;
    let calls = [
        (
            "toolu_a",
            "exec_command",
            r#"{"cmd":"until [ -e c.done ]; do sleep 0.05; done; sleep 0.3; echo A"}"#,
        ),
        (
            "toolu_b",
            "exec_command",
            r#"{"cmd":"echo B; touch b.done"}"#,
        ),
        (
            "toolu_c",
            "exec_command",
            r#"{"cmd":"until [ -e b.done ]; do sleep 0.05; done; sleep 0.3; echo C; touch c.done"}"#,
        ),
    ];
    let server = ScriptedServer::start(vec![
        Reply::sse_split(
            anthropic::tool_uses(Some(("I will run three commands.", "sig-abc")), &calls),
            64,
            Duration::ZERO,
        ),
        Reply::sse(anthropic::thinking_then_text(
            "All ran.",
            "sig-def",
            "A, B and C printed.",
        )),
    ])
    .await;
    let t = TestAgent::new();
    let session = t.session(ClientType::AnthropicMessages, &server.base_url());
    let stream = run_task(&session, "run them", allow()).await;
    assert_eq!(
        kinds(&stream),
        [
            "meta",
            "begin",
            "thinking:I will run three commands.",
            "call:toolu_a",
            "decide:toolu_a:allow",
            "call:toolu_b",
            "decide:toolu_b:allow",
            "call:toolu_c",
            "decide:toolu_c:allow",
            "usage",
            "end:completed",
            "out:toolu_b:completed",
            "out:toolu_c:completed",
            "out:toolu_a:completed",
            "begin",
            "thinking:All ran.",
            "text:A, B and C printed.",
            "usage",
            "end:completed"
        ]
    );
    let reqs = server.requests();
    assert_eq!(reqs[0].path, "/v1/messages");
    assert_eq!(reqs[0].header("x-api-key"), Some("sk-test-secret"));
    let messages = reqs[1].body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(messages.len(), 3, "{messages:?}");
    // The assistant turn replays the thinking with its signature, then the three tool_use blocks.
    let assistant = messages[1]["content"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(assistant[0]["type"], "thinking");
    assert_eq!(assistant[0]["thinking"], "I will run three commands.");
    assert_eq!(assistant[0]["signature"], "sig-abc");
    let ids: Vec<&str> = assistant[1..]
        .iter()
        .map(|b| b["id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(ids, ["toolu_a", "toolu_b", "toolu_c"]);
    assert_eq!(
        assistant[1]["input"],
        serde_json::json!({"cmd": "until [ -e c.done ]; do sleep 0.05; done; sleep 0.3; echo A"})
    );
    // The results come back in call order, although they finished b, c, a.
    let results = messages[2]["content"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let order: Vec<(&str, String)> = results
        .iter()
        .map(|r| {
            let content = match &r["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
                _ => String::new(),
            };
            (r["tool_use_id"].as_str().unwrap_or_default(), content)
        })
        .collect();
    assert_eq!(
        order,
        [
            ("toolu_a", "A\n".to_owned()),
            ("toolu_b", "B\n".to_owned()),
            ("toolu_c", "C\n".to_owned())
        ]
    );
    let trace = trace_of(&session);
    assert_trace_is_stream(
        &session,
        &[stream[0].clone(), trace[1].clone()],
        &stream[1..],
    );
}

#[tokio::test]
async fn the_agent_vault_reaches_commands_but_not_the_model() {
    let server = ScriptedServer::start(vec![
        Reply::sse(openai::exec(
            "call_1",
            "test ${#DEPLOY_TOKEN} = 6 && echo token is set",
        )),
        Reply::sse(openai::text("ok")),
    ])
    .await;
    let t = TestAgent::new();
    {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(t.agent.paths().vault())
            .and_then(|mut f| f.write_all(b"DEPLOY_TOKEN = \"s3cret\"\n"))
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let session = t.session(ClientType::OpenAiChat, &server.openai_base_url());
    let stream = run_task(&session, "check the token", allow()).await;
    assert_eq!(
        output_of(&stream, "call_1").as_deref(),
        Some("token is set\n")
    );
    for req in server.requests() {
        assert!(!req.body.to_string().contains("s3cret"));
    }
}

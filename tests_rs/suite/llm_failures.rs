//! How requests fail, for both protocols: HTTP statuses, cut and garbled streams, idle
//! timeouts, cancellation, back-pressure, unreachable servers. Every interruption closes the
//! open segment with its own stop reason (so a partial tool call is never dispatchable), and
//! no error message carries the API key.

use std::time::Duration;

use penguin_harness_core::config::ClientType;
use penguin_harness_core::llm::{LlmOutcome, ModelRequest};
use penguin_harness_core::protocol::{
    ModelPayload, OmniMessage, Role, StopReason, TextPayload, ToolCallPayload, user_text,
};
use penguin_harness_tests::llm::{TEST_KEY, check_discipline, client, completes, entry, run};
use penguin_harness_tests::sse::{anthropic, openai};
use penguin_harness_tests::{Reply, ScriptedServer};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const IDLE: Duration = Duration::from_secs(30);
/// Short idle timeout for the timeout tests; the stalls last far longer.
const SHORT_IDLE: Duration = Duration::from_millis(300);
/// A stall no test waits out: only the client's own timeout or cancel ends it.
const LONG_STALL: Duration = Duration::from_secs(120);

#[derive(Clone, Copy, Debug)]
enum Proto {
    OpenAi,
    Anthropic,
}

const BOTH: [Proto; 2] = [Proto::OpenAi, Proto::Anthropic];

fn oai_chunk(delta: Value) -> String {
    let c = json!({"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1,
        "model": "scripted", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
    format!("data: {c}\n\n")
}

impl Proto {
    fn kind(self) -> ClientType {
        match self {
            Proto::OpenAi => ClientType::OpenAiChat,
            Proto::Anthropic => ClientType::AnthropicMessages,
        }
    }

    fn url(self, server: &ScriptedServer) -> String {
        match self {
            Proto::OpenAi => server.openai_base_url(),
            Proto::Anthropic => server.base_url(),
        }
    }

    fn answer(self, text: &str) -> String {
        match self {
            Proto::OpenAi => openai::text(text),
            Proto::Anthropic => anthropic::text(text),
        }
    }

    /// A stream that has sent the text "Partial answ" and nothing more.
    fn text_prefix(self) -> String {
        match self {
            Proto::OpenAi => {
                let mut s = oai_chunk(json!({"role": "assistant", "content": ""}));
                s.push_str(&oai_chunk(json!({"content": "Partial "})));
                s.push_str(&oai_chunk(json!({"content": "answ"})));
                s
            }
            Proto::Anthropic => {
                let mut s = anthropic::message_start();
                s.push_str(&anthropic::event(
                    json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}),
                ));
                for piece in ["Partial ", "answ"] {
                    s.push_str(&anthropic::event(
                        json!({"type": "content_block_delta", "index": 0,
                        "delta": {"type": "text_delta", "text": piece}}),
                    ));
                }
                s
            }
        }
    }

    /// A stream that has started the call `call_cut` with arguments `{"cmd": "rm -` only.
    fn tool_prefix(self) -> String {
        match self {
            Proto::OpenAi => {
                let mut s = oai_chunk(json!({"role": "assistant", "content": null}));
                s.push_str(&oai_chunk(
                    json!({"tool_calls": [{"index": 0, "id": "call_cut",
                    "type": "function", "function": {"name": "exec_command", "arguments": ""}}]}),
                ));
                s.push_str(&oai_chunk(json!({"tool_calls": [{"index": 0,
                    "function": {"arguments": "{\"cmd\": \"rm -"}}]})));
                s
            }
            Proto::Anthropic => {
                let mut s = anthropic::message_start();
                s.push_str(&anthropic::event(json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "tool_use", "id": "call_cut", "name": "exec_command", "input": {}}})));
                s.push_str(&anthropic::event(
                    json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": "{\"cmd\": \"rm -"}}),
                ));
                s
            }
        }
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

fn cut_call(stop: StopReason) -> ModelPayload {
    ModelPayload::ToolCall(ToolCallPayload {
        role: Role::Assistant,
        name: "exec_command".into(),
        arguments: "{\"cmd\": \"rm -".into(),
        tool_call_id: "call_cut".into(),
        stop_reason: stop,
        fidelity: None,
    })
}

fn request(messages: &[OmniMessage]) -> ModelRequest<'_> {
    ModelRequest {
        system_prompt: "",
        messages,
        tools: &[],
        thinking: None,
        max_tokens: None,
    }
}

async fn attempt(proto: Proto, reply: Reply, idle: Duration) -> (Vec<OmniMessage>, LlmOutcome) {
    let server = ScriptedServer::start(vec![reply]).await;
    let c = client(&entry(proto.kind(), &proto.url(&server)), idle);
    let input = [user_text("hi")];
    let result = run(c.as_ref(), request(&input), CancellationToken::new()).await;
    check_discipline(&result.0).unwrap_or_else(|e| panic!("{proto:?}: {e}"));
    result
}

fn message(outcome: &LlmOutcome) -> &str {
    outcome.error_message.as_deref().unwrap_or("")
}

#[tokio::test]
async fn http_statuses_follow_the_taxonomy() {
    for proto in BOTH {
        let cases = [
            (
                500,
                r#"{"error":{"message":"internal failure","type":"server_error"}}"#,
                StopReason::Timeout,
                false,
            ),
            (503, "upstream unavailable", StopReason::Timeout, false),
            (
                429,
                r#"{"error":{"message":"rate limited","type":"rate_limit_error"}}"#,
                StopReason::Timeout,
                false,
            ),
            (
                401,
                r#"{"error":{"message":"invalid x-api-key","type":"authentication_error"}}"#,
                StopReason::Auth,
                false,
            ),
            (
                403,
                r#"{"error":{"message":"forbidden","type":"permission_error"}}"#,
                StopReason::Auth,
                false,
            ),
            (
                400,
                r#"{"error":{"message":"messages: field required","type":"invalid_request_error"}}"#,
                StopReason::Failed,
                true,
            ),
        ];
        for (status, body, want, permanent) in cases {
            let (msgs, outcome) = attempt(proto, Reply::status(status, body), IDLE).await;
            assert!(msgs.is_empty(), "{proto:?} {status}: {msgs:?}");
            assert_eq!(
                (outcome.status, outcome.permanent, outcome.usage),
                (want, permanent, None),
                "{proto:?} {status}: {outcome:?}"
            );
            let m = message(&outcome);
            assert!(m.starts_with(&format!("HTTP {status}: ")), "{proto:?}: {m}");
            let provider_text = serde_json::from_str::<Value>(body)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                .unwrap_or_else(|| body.to_owned());
            assert!(
                m.contains(&provider_text),
                "{proto:?}: {m} lacks {provider_text}"
            );
        }
    }
}

#[tokio::test]
async fn the_api_key_never_appears_in_an_error() {
    for proto in BOTH {
        let body = format!(
            r#"{{"error":{{"message":"Incorrect API key provided: {TEST_KEY}","type":"invalid_request_error","code":"invalid_api_key"}}}}"#
        );
        let (_, outcome) = attempt(proto, Reply::status(401, body), IDLE).await;
        assert_eq!(outcome.status, StopReason::Auth, "{proto:?}");
        let m = message(&outcome);
        assert!(!m.contains(TEST_KEY), "{proto:?}: key leaked in {m}");
        assert_eq!(
            m,
            "HTTP 401: invalid_request_error/invalid_api_key: Incorrect API key provided: [redacted]"
        );
    }
}

#[tokio::test]
async fn a_stream_cut_mid_text_is_malformed_with_the_segment_closed() {
    for proto in BOTH {
        let (msgs, outcome) = attempt(proto, Reply::sse(proto.text_prefix()), IDLE).await;
        assert_eq!(
            outcome.status,
            StopReason::Malformed,
            "{proto:?}: {outcome:?}"
        );
        assert_eq!(outcome.usage, None);
        assert_eq!(
            completes(&msgs),
            vec![text_msg("Partial answ", StopReason::Malformed)],
            "{proto:?}"
        );
    }
}

#[tokio::test]
async fn a_stream_cut_mid_tool_call_never_yields_a_dispatchable_call() {
    for proto in BOTH {
        let (msgs, outcome) = attempt(proto, Reply::sse(proto.tool_prefix()), IDLE).await;
        assert_eq!(
            outcome.status,
            StopReason::Malformed,
            "{proto:?}: {outcome:?}"
        );
        assert_eq!(
            completes(&msgs),
            vec![cut_call(StopReason::Malformed)],
            "{proto:?}"
        );
    }
}

#[tokio::test]
async fn garbled_and_empty_streams_are_malformed() {
    for proto in BOTH {
        let (msgs, outcome) = attempt(proto, Reply::sse("data: {not json\n\n"), IDLE).await;
        assert_eq!(outcome.status, StopReason::Malformed, "{proto:?}");
        assert!(message(&outcome).contains("JSON"), "{proto:?}: {outcome:?}");
        assert!(msgs.is_empty());

        let (msgs, outcome) = attempt(proto, Reply::sse(""), IDLE).await;
        assert_eq!(
            outcome,
            LlmOutcome::error(StopReason::Malformed, "the model returned an empty stream"),
            "{proto:?}"
        );
        assert!(msgs.is_empty());

        // Garbage after content: the open text is closed as malformed.
        let body = format!("{}data: <html>oops</html>\n\n", proto.text_prefix());
        let (msgs, outcome) = attempt(proto, Reply::sse(body), IDLE).await;
        assert_eq!(outcome.status, StopReason::Malformed, "{proto:?}");
        assert_eq!(
            completes(&msgs),
            vec![text_msg("Partial answ", StopReason::Malformed)]
        );
    }
}

#[tokio::test]
async fn a_silent_stream_times_out_and_closes_its_segment() {
    for proto in BOTH {
        let (msgs, outcome) = attempt(
            proto,
            Reply::stall(proto.tool_prefix(), LONG_STALL),
            SHORT_IDLE,
        )
        .await;
        assert_eq!(
            outcome,
            LlmOutcome::error(
                StopReason::Timeout,
                "no data from the model for 300 ms (idle timeout)"
            ),
            "{proto:?}"
        );
        assert_eq!(
            completes(&msgs),
            vec![cut_call(StopReason::Timeout)],
            "{proto:?}"
        );
    }
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    // Accepts the connection, reads the request, never writes a byte.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    for proto in BOTH {
        let base = match proto {
            Proto::OpenAi => format!("http://127.0.0.1:{port}/v1"),
            Proto::Anthropic => format!("http://127.0.0.1:{port}"),
        };
        let c = client(&entry(proto.kind(), &base), SHORT_IDLE);
        let input = [user_text("hi")];
        let (msgs, outcome) = run(c.as_ref(), request(&input), CancellationToken::new()).await;
        assert!(msgs.is_empty());
        assert_eq!(
            outcome.status,
            StopReason::Timeout,
            "{proto:?}: {outcome:?}"
        );
    }
    holder.abort();
}

#[tokio::test]
async fn an_unreachable_server_is_a_retryable_timeout() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    for proto in BOTH {
        let base = match proto {
            Proto::OpenAi => format!("http://127.0.0.1:{port}/v1"),
            Proto::Anthropic => format!("http://127.0.0.1:{port}"),
        };
        let c = client(&entry(proto.kind(), &base), IDLE);
        let input = [user_text("hi")];
        let (_, outcome) = run(c.as_ref(), request(&input), CancellationToken::new()).await;
        assert_eq!(
            outcome.status,
            StopReason::Timeout,
            "{proto:?}: {outcome:?}"
        );
        assert!(
            message(&outcome).starts_with("request failed: "),
            "{proto:?}: {outcome:?}"
        );
        assert!(!message(&outcome).contains(TEST_KEY));
    }
}

#[tokio::test]
async fn cancel_mid_stream_aborts_and_closes_the_open_segment() {
    for proto in BOTH {
        let server =
            ScriptedServer::start(vec![Reply::stall(proto.text_prefix(), LONG_STALL)]).await;
        let c = client(&entry(proto.kind(), &proto.url(&server)), IDLE);
        let cancel = CancellationToken::new();
        let (tx, mut rx) = mpsc::channel::<OmniMessage>(16);
        let input = [user_text("hi")];
        let consumer_cancel = cancel.clone();
        let consumer = async move {
            let mut msgs: Vec<OmniMessage> = Vec::new();
            while let Some(m) = rx.recv().await {
                if matches!(m.model(), Some(ModelPayload::PartialText(p)) if p.text == "answ") {
                    consumer_cancel.cancel();
                }
                msgs.push(m);
            }
            msgs
        };
        let c2 = c.clone();
        let producer = async move { c2.stream(request(&input), cancel, &tx).await };
        let (outcome, msgs) = tokio::join!(producer, consumer);
        assert_eq!(
            outcome,
            LlmOutcome::error(StopReason::Aborted, "request aborted by user"),
            "{proto:?}"
        );
        check_discipline(&msgs).unwrap();
        assert_eq!(
            completes(&msgs),
            vec![text_msg("Partial answ", StopReason::Aborted)],
            "{proto:?}"
        );
    }
}

#[tokio::test]
async fn a_request_cancelled_before_it_starts_sends_nothing() {
    for proto in BOTH {
        let server = ScriptedServer::start(vec![Reply::sse(proto.answer("unused"))]).await;
        let c = client(&entry(proto.kind(), &proto.url(&server)), IDLE);
        let cancel = CancellationToken::new();
        cancel.cancel();
        let input = [user_text("hi")];
        let (msgs, outcome) = run(c.as_ref(), request(&input), cancel).await;
        assert_eq!(outcome.status, StopReason::Aborted, "{proto:?}");
        assert!(msgs.is_empty());
        assert!(
            server.requests().is_empty(),
            "{proto:?}: a request went out"
        );
    }
}

#[tokio::test]
async fn waiting_for_a_slow_consumer_does_not_count_as_idle() {
    for proto in BOTH {
        let answer = "one two three four five six seven eight";
        let server = ScriptedServer::start(vec![Reply::sse(proto.answer(answer))]).await;
        let c = client(&entry(proto.kind(), &proto.url(&server)), SHORT_IDLE);
        // One slot: the client blocks on every message while the consumer dawdles for longer
        // than the idle timeout before its first read.
        let (tx, mut rx) = mpsc::channel::<OmniMessage>(1);
        let input = [user_text("hi")];
        let consumer = async move {
            tokio::time::sleep(SHORT_IDLE * 3).await;
            let mut msgs: Vec<OmniMessage> = Vec::new();
            while let Some(m) = rx.recv().await {
                msgs.push(m);
            }
            msgs
        };
        let producer = async move {
            c.stream(request(&input), CancellationToken::new(), &tx)
                .await
        };
        let (outcome, msgs) = tokio::join!(producer, consumer);
        assert_eq!(
            outcome.status,
            StopReason::Completed,
            "{proto:?}: {outcome:?}"
        );
        assert_eq!(
            completes(&msgs),
            vec![text_msg(answer, StopReason::Completed)]
        );
    }
}

#[tokio::test]
async fn a_json_error_body_with_status_200_is_classified() {
    for proto in BOTH {
        let reply = Reply::Status {
            status: 200,
            content_type: "application/json".into(),
            body: r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#.into(),
        };
        let (msgs, outcome) = attempt(proto, reply, IDLE).await;
        assert!(msgs.is_empty());
        assert_eq!(
            outcome,
            LlmOutcome::error(
                StopReason::Timeout,
                "provider error in stream: overloaded_error: busy"
            ),
            "{proto:?}"
        );
    }
}

//! Loop logic against an in-process scripted model (the HTTP clients are covered by the
//! integration suite): turn structure, approvals, ordering, retries, carry-over, trace.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::approval::{ApprovalError, Approver, FixedApprover};
use crate::config::{Permission, ToolDefinitionConfig};
use crate::environment::Environment;
use crate::llm::{LlmOutcome, ModelClient, ModelRequest};
use crate::protocol::*;
use crate::tools::{Tool, ToolArgs, ToolContext, ToolError, ToolResult, ToolServices};
use crate::trace::{TraceWriter, read_trace};

enum Step {
    Emit(OmniMessage),
    Sleep(u64),
    /// Waits for the cancel token, then closes like a real client: aborted.
    UntilCancelled,
    End(LlmOutcome),
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Vec<Step>>,
    requests: Vec<Vec<OmniMessage>>,
}

#[derive(Clone, Default)]
struct ScriptedModel(Arc<Mutex<Script>>);

impl ScriptedModel {
    fn new(replies: Vec<Vec<Step>>) -> Self {
        ScriptedModel(Arc::new(Mutex::new(Script {
            replies: replies.into(),
            requests: vec![],
        })))
    }
    fn requests(&self) -> Vec<Vec<OmniMessage>> {
        self.0.lock().unwrap().requests.clone()
    }
}

#[async_trait]
impl ModelClient for ScriptedModel {
    async fn stream(
        &self,
        req: ModelRequest<'_>,
        cancel: CancellationToken,
        out: &mpsc::Sender<OmniMessage>,
    ) -> LlmOutcome {
        let steps = {
            let mut s = self.0.lock().unwrap();
            s.requests.push(req.messages.to_vec());
            s.replies.pop_front().unwrap_or_else(|| {
                vec![Step::End(LlmOutcome::error(
                    StopReason::Failed,
                    "script exhausted",
                ))]
            })
        };
        for step in steps {
            match step {
                Step::Emit(m) => {
                    let _ = out.send(m).await;
                }
                Step::Sleep(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                Step::UntilCancelled => {
                    cancel.cancelled().await;
                    let _ = out
                        .send(partial_text(EventType::Stop, "", StopReason::Aborted))
                        .await;
                    let _ = out
                        .send(assistant_text("partial answ", StopReason::Aborted))
                        .await;
                    return LlmOutcome::error(StopReason::Aborted, "aborted");
                }
                Step::End(o) => return o,
            }
        }
        LlmOutcome::completed(Some(TokenCounts::new(0, 10, 5)))
    }
}

fn text_reply(text: &str) -> Vec<Step> {
    vec![
        Step::Emit(partial_text(EventType::Start, "", StopReason::Completed)),
        Step::Emit(partial_text(EventType::Delta, text, StopReason::Completed)),
        Step::Emit(partial_text(EventType::Stop, "", StopReason::Completed)),
        Step::Emit(assistant_text(text, StopReason::Completed)),
    ]
}

fn calls_reply(calls: &[(&str, u64, &str)]) -> Vec<Step> {
    calls
        .iter()
        .map(|(id, ms, text)| {
            Step::Emit(tool_call(
                "sleep_echo",
                json!({"ms": ms, "text": text}).to_string(),
                *id,
                StopReason::Completed,
            ))
        })
        .collect()
}

struct SleepEcho {
    def: ToolDefinitionConfig,
    runs: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Tool for SleepEcho {
    fn definition(&self) -> &ToolDefinitionConfig {
        &self.def
    }
    async fn execute(&self, args: ToolArgs, ctx: ToolContext) -> Result<ToolResult, ToolError> {
        let ms = args.get("ms").and_then(|v| v.as_u64()).unwrap_or(0);
        let text = args
            .get("text")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_owned();
        self.runs.lock().unwrap().push(ctx.tool_call_id.clone());
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(ms)) => {
                ctx.output.delta(text).await;
                Ok(ToolResult::completed())
            }
            _ = ctx.cancel.cancelled() => Ok(ToolResult::aborted()),
        }
    }
}

struct Harness {
    engine: Engine,
    model: ScriptedModel,
    runs: Arc<Mutex<Vec<String>>>,
    trace_path: std::path::PathBuf,
}

fn harness(replies: Vec<Vec<Step>>, max_turns: i64) -> Harness {
    let runs = Arc::new(Mutex::new(Vec::new()));
    let tool = Arc::new(SleepEcho {
        def: ToolDefinitionConfig {
            name: "sleep_echo".into(),
            description: "sleeps then echoes".into(),
            parameters: Some(
                json!({"type": "object", "properties": {"ms": {"type": "integer"}, "text": {"type": "string"}}}),
            ),
            permission: Permission::Read,
            for_model: None,
            timeout_ms: 10_000,
            max_output_length: 16_000,
        },
        runs: runs.clone(),
    });
    let env = Arc::new(Environment::with_tools(
        "/tmp",
        vec![tool],
        ToolServices::default(),
    ));
    let model = ScriptedModel::new(replies);
    let trace_path = std::env::temp_dir().join(format!(
        "ph-engine-{}-{}/s_001.jsonl",
        std::process::id(),
        rand::random::<u32>()
    ));
    let trace = TraceWriter::open(&trace_path).unwrap();
    let meta = session_meta(SessionMeta {
        session_id: "session-test".into(),
        provider: "scripted".into(),
        model_id: "m".into(),
        model_context_window: ContextWindow::Unknown,
        system_prompt: "sys".into(),
        agent_state: "/tmp/a".into(),
        workspace: "/tmp".into(),
        source: None,
    });
    let settings = EngineSettings {
        system_prompt: "sys".into(),
        max_turns,
        reconnect: ReconnectSettings {
            max_retries: 2,
            base_delay_ms: 1,
        },
        max_tokens: 1000,
        context_window: None,
        default_thinking: None,
    };
    let engine = Engine::new(
        Arc::new(model.clone()),
        env,
        Some(trace),
        settings,
        Some(meta),
        EngineState::default(),
    );
    Harness {
        engine,
        model,
        runs,
        trace_path,
    }
}

async fn run(
    h: &mut Harness,
    input: Vec<OmniMessage>,
    approver: Option<Arc<dyn Approver>>,
    cancel: CancellationToken,
) -> Vec<OmniMessage> {
    let (tx, mut rx) = mpsc::channel(16);
    let collect = tokio::spawn(async move {
        let mut v = Vec::new();
        while let Some(m) = rx.recv().await {
            v.push(m);
        }
        v
    });
    h.engine
        .run(
            input,
            RunOptions {
                approver,
                thinking: None,
            },
            cancel,
            tx,
        )
        .await;
    collect.await.unwrap()
}

fn allow() -> Option<Arc<dyn Approver>> {
    Some(Arc::new(FixedApprover(Decision::Allow)))
}

/// Short names for a stream, to compare whole sequences.
fn kinds(stream: &[OmniMessage]) -> Vec<String> {
    stream
        .iter()
        .map(|m| match &m.body {
            Body::SessionMeta(_) => "meta".to_owned(),
            Body::Model(p) => match p {
                ModelPayload::PartialText(x) => format!("pt:{:?}", x.event_type),
                ModelPayload::Text(x) => format!("text:{}", x.text),
                ModelPayload::ToolCall(x) => format!("call:{}", x.tool_call_id),
                ModelPayload::ToolCallOutput(x) => {
                    format!("out:{}:{}:{}", x.tool_call_id, x.stop_reason, x.output)
                }
                ModelPayload::PartialToolCallOutput(x) => {
                    format!("po:{}:{:?}", x.tool_call_id, x.event_type)
                }
                other => format!("{other:?}"),
            },
            Body::Event(e) => match e {
                EventPayload::RequestBegin {} => "begin".into(),
                EventPayload::RequestEnd(r) => format!(
                    "end:{}{}{}",
                    r.status,
                    r.attempt.map(|a| format!(":a{a}")).unwrap_or_default(),
                    r.retry_in_ms.map(|a| format!(":r{a}")).unwrap_or_default()
                ),
                EventPayload::ApprovalDecision(d) => {
                    format!("decide:{}:{}", d.tool_call_id, d.decision.as_str())
                }
                EventPayload::TokenUsage(_) => "usage".into(),
                EventPayload::Abort(a) => format!("abort:{}", a.reason.clone().unwrap_or_default()),
                other => format!("{other:?}"),
            },
        })
        .collect()
}

async fn trace_of(h: &Harness) -> Vec<OmniMessage> {
    h.engine.trace.as_ref().unwrap().flush().await;
    read_trace(&h.trace_path).unwrap()
}

#[tokio::test]
async fn a_text_answer_and_the_trace_is_the_stream_minus_partials() {
    let mut h = harness(vec![text_reply("hello")], -1);
    let prompt = user_text("hi");
    let stream = run(&mut h, vec![prompt.clone()], None, CancellationToken::new()).await;
    assert_eq!(
        kinds(&stream),
        [
            "meta",
            "begin",
            "pt:Start",
            "pt:Delta",
            "pt:Stop",
            "text:hello",
            "usage",
            "end:completed"
        ]
    );
    let trace = trace_of(&h).await;
    // session_meta, the prompt (traced, not echoed), then the stream minus partials.
    let mut expected: Vec<OmniMessage> = vec![stream[0].clone(), prompt];
    expected.extend(
        stream[1..]
            .iter()
            .filter(|m| !is_partial_payload(m))
            .cloned(),
    );
    assert_eq!(trace, expected);
    // The context now holds the prompt and the answer.
    assert_eq!(h.engine.state().context.len(), 2);
    assert_eq!(h.engine.state().session_turns, 1);
}

#[tokio::test]
async fn parallel_calls_stream_in_completion_order_and_feed_back_in_call_order() {
    let mut h = harness(
        vec![
            calls_reply(&[("a", 300, "A"), ("b", 10, "B"), ("c", 150, "C")]),
            text_reply("done"),
        ],
        -1,
    );
    let stream = run(
        &mut h,
        vec![user_text("go")],
        allow(),
        CancellationToken::new(),
    )
    .await;
    let outs: Vec<String> = kinds(&stream)
        .into_iter()
        .filter(|k| k.starts_with("out:"))
        .collect();
    assert_eq!(
        outs,
        [
            "out:b:completed:B",
            "out:c:completed:C",
            "out:a:completed:A"
        ]
    );
    let second = &h.model.requests()[1];
    let fed: Vec<String> = second
        .iter()
        .filter_map(|m| m.as_tool_call_output())
        .map(|o| o.tool_call_id.clone())
        .collect();
    assert_eq!(fed, ["a", "b", "c"]);
    // Approvals: one per call, in call order, each before its output.
    let decisions: Vec<String> = kinds(&stream)
        .into_iter()
        .filter(|k| k.starts_with("decide:"))
        .collect();
    assert_eq!(
        decisions,
        ["decide:a:allow", "decide:b:allow", "decide:c:allow"]
    );
    // token_usage then request_end come before the slow outputs.
    let k = kinds(&stream);
    let end = k.iter().position(|x| x == "end:completed").unwrap();
    let out_a = k.iter().position(|x| x.starts_with("out:a")).unwrap();
    assert!(end < out_a, "{k:?}");
    assert_eq!(k[end - 1], "usage");
}

struct Failing;
#[async_trait]
impl Approver for Failing {
    async fn approve(&self, _: &OmniMessage) -> Result<Decision, ApprovalError> {
        Err(ApprovalError::new("ValueError: nope"))
    }
}

#[tokio::test]
async fn denials_no_callback_and_failing_callbacks_feed_back_denied_outputs() {
    for (approver, why) in [
        (
            Some(Arc::new(FixedApprover(Decision::Deny)) as Arc<dyn Approver>),
            None,
        ),
        (None, None),
        (
            Some(Arc::new(Failing) as Arc<dyn Approver>),
            Some("approval callback failed: ValueError: nope"),
        ),
    ] {
        let mut h = harness(vec![calls_reply(&[("x", 0, "X")]), text_reply("ok")], -1);
        let stream = run(
            &mut h,
            vec![user_text("go")],
            approver,
            CancellationToken::new(),
        )
        .await;
        let k = kinds(&stream);
        assert!(k.contains(&"decide:x:deny".to_owned()), "{k:?}");
        assert!(
            k.contains(&"out:x:aborted:Tool call denied by user.".to_owned()),
            "{k:?}"
        );
        assert!(h.runs.lock().unwrap().is_empty(), "denied tools never run");
        let decision = stream.iter().find_map(|m| match m.event() {
            Some(EventPayload::ApprovalDecision(d)) => Some(d.clone()),
            _ => None,
        });
        assert_eq!(decision.and_then(|d| d.error_message).as_deref(), why);
        let fed = &h.model.requests()[1];
        assert_eq!(
            fed.last()
                .and_then(|m| m.as_tool_call_output())
                .map(|o| o.output.as_str()),
            Some("Tool call denied by user.")
        );
    }
}

#[tokio::test]
async fn a_failed_request_is_retried_with_a_transcript_and_tools_are_not_rerun() {
    let mut first = calls_reply(&[("t1", 0, "ran")]);
    first.push(Step::Sleep(100));
    first.push(Step::End(LlmOutcome::error(
        StopReason::Timeout,
        "HTTP 500 Internal Server Error",
    )));
    let mut h = harness(vec![first, text_reply("recovered")], -1);
    let stream = run(
        &mut h,
        vec![user_text("go")],
        allow(),
        CancellationToken::new(),
    )
    .await;
    let k = kinds(&stream);
    assert!(k.contains(&"end:timeout:a1:r1".to_owned()), "{k:?}");
    assert!(k.contains(&"end:completed:a2".to_owned()), "{k:?}");
    assert_eq!(*h.runs.lock().unwrap(), ["t1"], "the tool ran once");
    let retry = &h.model.requests()[1];
    let last = retry.last().and_then(|m| match m.model() {
        Some(ModelPayload::Text(t)) => Some(t.text.clone()),
        _ => None,
    });
    assert_eq!(
        last.as_deref(),
        Some(
            "[turn_retried]\n  [tool_call name=\"sleep_echo\" id=\"t1\"]{\"ms\":0,\"text\":\"ran\"}[/tool_call]\n  [tool_call_output id=\"t1\" status=\"completed\"]ran[/tool_call_output]\n[/turn_retried]"
        )
    );
    assert_eq!(k.last().map(String::as_str), Some("end:completed:a2"));
}

#[tokio::test]
async fn auth_is_never_retried_and_exhausted_retries_abort() {
    let mut h = harness(
        vec![vec![Step::End(LlmOutcome::error(
            StopReason::Auth,
            "HTTP 401: invalid_api_key",
        ))]],
        -1,
    );
    let stream = run(
        &mut h,
        vec![user_text("go")],
        None,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        kinds(&stream)[1..],
        [
            "begin",
            "end:auth:a1",
            "abort:llm request error: HTTP 401: invalid_api_key"
        ]
    );
    assert_eq!(h.model.requests().len(), 1);

    let fail = || {
        vec![Step::End(LlmOutcome::error(
            StopReason::Malformed,
            "stream ended early",
        ))]
    };
    let mut h = harness(vec![fail(), fail(), fail()], -1);
    let stream = run(
        &mut h,
        vec![user_text("go")],
        None,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        kinds(&stream)[1..],
        [
            "begin",
            "end:malformed:a1:r1",
            "begin",
            "end:malformed:a2:r2",
            "begin",
            "end:malformed:a3",
            "abort:malformed response failed after 2 retries"
        ]
    );
    // Carry-over keeps the prompt for the next run.
    assert_eq!(h.engine.state().carry_over.len(), 1);
}

#[tokio::test]
async fn abort_while_streaming_leaves_a_turn_aborted_carry_over() {
    let mut h = harness(
        vec![
            vec![
                Step::Emit(partial_text(EventType::Start, "", StopReason::Completed)),
                Step::UntilCancelled,
            ],
            text_reply("ok"),
        ],
        -1,
    );
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        c.cancel();
    });
    let stream = run(&mut h, vec![user_text("write a poem")], None, cancel).await;
    assert_eq!(
        kinds(&stream).last().map(String::as_str),
        Some("abort:aborted by user")
    );
    let carry = h.engine.state().carry_over.clone();
    assert_eq!(carry.len(), 1);
    let Some(ModelPayload::Text(t)) = carry[0].model() else {
        panic!("{carry:?}")
    };
    assert_eq!(
        t.text,
        "[turn_aborted]\n  [user_input]write a poem[/user_input]\n  [text]partial answ[/text]\n[/turn_aborted]"
    );
    assert!(h.engine.state().context.is_empty(), "nothing committed");
    // The next run sends the carry-over first, then the new prompt; the trace never gets it.
    let _ = run(
        &mut h,
        vec![user_text("again")],
        None,
        CancellationToken::new(),
    )
    .await;
    let req = &h.model.requests()[1];
    assert_eq!(req.len(), 2);
    assert_eq!(req[0], carry[0]);
    let trace = trace_of(&h).await;
    assert!(!trace.iter().any(|m| m == &carry[0]));
}

#[tokio::test]
async fn abort_during_tools_backfills_placeholders() {
    let mut h = harness(
        vec![
            calls_reply(&[("fast", 0, "F"), ("slow", 5000, "S")]),
            text_reply("ok"),
        ],
        -1,
    );
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c.cancel();
    });
    let stream = run(&mut h, vec![user_text("go")], allow(), cancel).await;
    let k = kinds(&stream);
    assert!(
        k.contains(&"out:slow:aborted:[interrupted: tool aborted by user]".to_owned()),
        "{k:?}"
    );
    assert_eq!(k.last().map(String::as_str), Some("abort:aborted by user"));
    // Case A: the request completed, so both outputs are carried structurally.
    let carry: Vec<(String, String)> = h
        .engine
        .state()
        .carry_over
        .iter()
        .filter_map(|m| m.as_tool_call_output())
        .map(|o| (o.tool_call_id.clone(), o.output.clone()))
        .collect();
    assert_eq!(
        carry,
        [
            ("fast".into(), "F".into()),
            ("slow".into(), "[interrupted: tool aborted by user]".into())
        ]
    );
    // The committed context holds the prompt and both calls.
    assert_eq!(h.engine.state().context.len(), 3);
}

#[tokio::test]
async fn max_turns_stops_with_a_failed_notice() {
    let mut h = harness(
        vec![calls_reply(&[("a", 0, "A")]), calls_reply(&[("b", 0, "B")])],
        1,
    );
    let stream = run(
        &mut h,
        vec![user_text("go")],
        allow(),
        CancellationToken::new(),
    )
    .await;
    let k = kinds(&stream);
    assert_eq!(
        k[k.len() - 4..],
        [
            "pt:Start",
            "pt:Delta",
            "pt:Stop",
            "text:[reached max turns (1); stopping]"
        ]
    );
    assert_eq!(h.model.requests().len(), 1);
    assert_eq!(
        h.engine.state().carry_over.len(),
        1,
        "the pending output waits for the next run"
    );
}

#[tokio::test]
async fn duplicate_tool_call_ids_are_made_unique() {
    let mut h = harness(
        vec![
            calls_reply(&[("dup", 0, "1")]),
            calls_reply(&[("dup", 0, "2")]),
            text_reply("ok"),
        ],
        -1,
    );
    let stream = run(
        &mut h,
        vec![user_text("go")],
        allow(),
        CancellationToken::new(),
    )
    .await;
    let calls: Vec<String> = kinds(&stream)
        .into_iter()
        .filter(|k| k.starts_with("call:"))
        .collect();
    assert_eq!(calls, ["call:dup", "call:dup#2"]);
    let outs: Vec<String> = kinds(&stream)
        .into_iter()
        .filter(|k| k.starts_with("out:"))
        .collect();
    assert_eq!(outs, ["out:dup:completed:1", "out:dup#2:completed:2"]);
}

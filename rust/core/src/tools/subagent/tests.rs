//! Subagent logic through real sessions (agent folders, traces, the engine) with an
//! in-process model that answers each session from its own script, keyed by the session's
//! first prompt. Gates (semaphores) hold a child mid-request until a script step opens them,
//! so "still running at the deadline" never depends on timing. The HTTP model clients and the
//! command tools are covered by the integration suite.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::approval::{ApprovalError, Approver, Decision, FixedApprover};
use crate::config::ModelEntry;
use crate::engine::RunOptions;
use crate::environment::Environment;
use crate::llm::{LlmOutcome, ModelClient, ModelRequest};
use crate::protocol::*;
use crate::session::{Agent, Session, SessionOptions, paths};
use crate::tools::MAX_YIELD_MS;
use crate::trace::read_trace;

type Dynamic = fn(&[OmniMessage]) -> OmniMessage;

enum Step {
    Emit(Box<OmniMessage>),
    /// Builds a message from the request (e.g. a call naming a subagent_id seen earlier).
    EmitWith(Dynamic),
    /// Waits for a permit; a cancelled request ends `aborted`.
    Wait(Arc<Semaphore>),
    /// Adds a permit.
    Open(Arc<Semaphore>),
}

#[derive(Default)]
struct Scripts {
    by_prompt: HashMap<String, VecDeque<Vec<Step>>>,
}

/// Answers every session from the script of its first user text.
#[derive(Clone, Default)]
struct RoutedModel(Arc<Mutex<Scripts>>);

impl RoutedModel {
    /// Appends replies to the script of the session whose first prompt is `prompt`.
    fn script(&self, prompt: &str, replies: Vec<Vec<Step>>) {
        self.0
            .lock()
            .unwrap()
            .by_prompt
            .entry(prompt.to_owned())
            .or_default()
            .extend(replies);
    }
}

fn first_user_text(messages: &[OmniMessage]) -> String {
    messages
        .iter()
        .find_map(|m| match m.model() {
            Some(ModelPayload::Text(t)) if t.role == Role::User => Some(t.text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[async_trait]
impl ModelClient for RoutedModel {
    async fn stream(
        &self,
        req: ModelRequest<'_>,
        cancel: CancellationToken,
        out: &mpsc::Sender<OmniMessage>,
    ) -> LlmOutcome {
        let key = first_user_text(req.messages);
        let steps = self
            .0
            .lock()
            .unwrap()
            .by_prompt
            .get_mut(&key)
            .and_then(VecDeque::pop_front);
        let Some(steps) = steps else {
            let mut o = LlmOutcome::error(StopReason::Failed, format!("no script left for {key}"));
            o.permanent = true;
            return o;
        };
        for step in steps {
            match step {
                Step::Emit(m) => {
                    let _ = out.send(*m).await;
                }
                Step::EmitWith(f) => {
                    let _ = out.send(f(req.messages)).await;
                }
                Step::Wait(gate) => {
                    tokio::select! {
                        permit = gate.acquire() => permit.unwrap().forget(),
                        _ = cancel.cancelled() => {
                            return LlmOutcome::error(StopReason::Aborted, "aborted");
                        }
                    }
                }
                Step::Open(gate) => gate.add_permits(1),
            }
        }
        LlmOutcome::completed(Some(TokenCounts::new(0, 10, 5)))
    }
}

fn text(answer: &str) -> Vec<Step> {
    vec![
        Step::Emit(Box::new(partial_text(
            EventType::Start,
            "",
            StopReason::Completed,
        ))),
        Step::Emit(Box::new(partial_text(
            EventType::Delta,
            answer,
            StopReason::Completed,
        ))),
        Step::Emit(Box::new(partial_text(
            EventType::Stop,
            "",
            StopReason::Completed,
        ))),
        Step::Emit(Box::new(assistant_text(answer, StopReason::Completed))),
    ]
}

fn call(name: &str, args: Value, id: &str) -> Step {
    Step::Emit(Box::new(tool_call(
        name,
        args.to_string(),
        id,
        StopReason::Completed,
    )))
}

/// The subagent ids named by the notes in the request's latest tool outputs, in call order.
fn ids_in(messages: &[OmniMessage]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| m.as_tool_call_output())
        .filter_map(|o| {
            let at = o.output.find("subagent_id subagent-")?;
            let id = &o.output[at + "subagent_id ".len()..];
            Some(id[..id.find([';', ']'])?].to_owned())
        })
        .collect()
}

struct Fixture {
    dir: PathBuf,
    agent: Agent,
    model: RoutedModel,
    workspace: PathBuf,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn fixture() -> Fixture {
    let dir = std::env::temp_dir().join(format!(
        "ph-subagent-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let workspace = dir.join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let workspace = workspace.canonicalize().unwrap();
    let agent = Agent::open(Some(&dir.join("root")), "p", "a").unwrap();
    Fixture {
        dir,
        agent,
        model: RoutedModel::default(),
        workspace,
    }
}

impl Fixture {
    fn session(&self) -> Session {
        self.agent
            .create_session(SessionOptions {
                workspace_dir: Some(self.workspace.clone()),
                model: Some(ModelEntry::new("scripted", "m")),
                client: Some(Arc::new(self.model.clone())),
                ..SessionOptions::default()
            })
            .unwrap()
    }

    fn child_trace(&self, child_id: &str) -> Vec<OmniMessage> {
        let date = paths::session_date(child_id).unwrap();
        read_trace(&self.agent.paths().trace_file(date, child_id, 1)).unwrap()
    }
}

async fn run(session: &Session, prompt: &str, approver: Arc<dyn Approver>) -> Vec<OmniMessage> {
    session
        .run(
            vec![user_text(prompt)],
            RunOptions {
                approver: Some(approver),
                thinking: None,
            },
        )
        .unwrap()
        .collect()
        .await
}

fn allow() -> Arc<dyn Approver> {
    Arc::new(FixedApprover(Decision::Allow))
}

/// The parent's own complete tool outputs: (output, stop reason), in stream order.
fn outputs(stream: &[OmniMessage]) -> Vec<(String, StopReason)> {
    stream
        .iter()
        .filter(|m| !m.has_origin())
        .filter_map(|m| m.as_tool_call_output())
        .map(|o| (o.output.clone(), o.stop_reason))
        .collect()
}

/// The session id of each child whose `session_meta` passed through the stream.
fn child_ids(stream: &[OmniMessage]) -> Vec<String> {
    stream
        .iter()
        .filter(|m| m.has_origin())
        .filter_map(|m| match &m.body {
            Body::SessionMeta(meta) => Some(meta.session_id.clone()),
            _ => None,
        })
        .collect()
}

fn kind(m: &OmniMessage) -> String {
    match &m.body {
        Body::SessionMeta(_) => "session_meta".into(),
        Body::Model(p) => match p {
            ModelPayload::Text(t) => format!("text:{}", t.text),
            ModelPayload::ToolCall(c) => format!("tool_call:{}", c.name),
            ModelPayload::ToolCallOutput(o) => format!("output:{}", o.output),
            other if other.is_partial() => "partial".into(),
            _ => "model".into(),
        },
        Body::Event(e) => match e {
            EventPayload::RequestBegin {} => "request_begin".into(),
            EventPayload::RequestEnd(_) => "request_end".into(),
            EventPayload::ApprovalDecision(d) => format!("decision:{}", d.decision.as_str()),
            EventPayload::TokenUsage(_) => "token_usage".into(),
            EventPayload::Abort(a) => format!("abort:{}", a.reason.clone().unwrap_or_default()),
            EventPayload::Subagent(s) => format!("subagent:{}", s.session_id),
            _ => "event".into(),
        },
    }
}

fn kinds(msgs: &[OmniMessage]) -> Vec<String> {
    msgs.iter().map(kind).collect()
}

#[tokio::test]
async fn a_foreground_child_answers_through_the_parent() {
    let fx = fixture();
    fx.model.script(
        "parent task",
        vec![
            vec![call(RUN_SUBAGENT, json!({"prompt": "child task"}), "c1")],
            text("parent done"),
        ],
    );
    fx.model.script("child task", vec![text("child answer")]);
    let parent = fx.session();
    let stream = run(&parent, "parent task", allow()).await;

    let ids = child_ids(&stream);
    assert_eq!(ids.len(), 1, "{:?}", kinds(&stream));
    let child = ids[0].clone();
    // Every forwarded message names the child, and the child's whole run passes through,
    // session_meta first (partials skipped in this view).
    let forwarded: Vec<&OmniMessage> = stream.iter().filter(|m| m.has_origin()).collect();
    assert!(
        forwarded
            .iter()
            .all(|m| m.origin.as_deref() == Some(&[child.clone()][..]))
    );
    let forwarded_complete: Vec<String> = forwarded
        .iter()
        .filter(|m| !is_partial_payload(m))
        .map(|m| kind(m))
        .collect();
    assert_eq!(
        forwarded_complete,
        [
            "session_meta",
            "request_begin",
            "text:child answer",
            "token_usage",
            "request_end"
        ]
    );
    assert_eq!(
        outputs(&stream),
        [("child answer".to_owned(), StopReason::Completed)]
    );

    // The parent's trace: its own messages and one pointer (written when the child's
    // session_meta passed, so before the call's output), nothing of the child's.
    let trace = kinds(&read_trace(parent.trace_path()).unwrap());
    let pointer = format!("subagent:{child}");
    let at = |k: &str| trace.iter().position(|t| t == k);
    assert_eq!(trace.iter().filter(|t| **t == pointer).count(), 1);
    assert!(at(&pointer) < at("output:child answer"));
    assert!(at("decision:allow") < at(&pointer));
    assert_eq!(
        trace
            .iter()
            .filter(|t| **t != pointer)
            .cloned()
            .collect::<Vec<_>>(),
        [
            "session_meta".to_owned(),
            "text:parent task".into(),
            "request_begin".into(),
            "tool_call:run_subagent".into(),
            "decision:allow".into(),
            "token_usage".into(),
            "request_end".into(),
            "output:child answer".into(),
            "request_begin".into(),
            "text:parent done".into(),
            "token_usage".into(),
            "request_end".into(),
        ]
    );

    // The child's own trace, marked as a subagent session in the same workspace.
    let child_trace = fx.child_trace(&child);
    match &child_trace[0].body {
        Body::SessionMeta(meta) => {
            assert_eq!(meta.source, Some(SessionSource::Subagent));
            assert_eq!(meta.workspace, fx.workspace.display().to_string());
            assert_eq!(
                (meta.provider.as_str(), meta.model_id.as_str()),
                ("scripted", "m")
            );
        }
        other => panic!("first line {other:?}"),
    }
    assert_eq!(
        kinds(&child_trace),
        [
            "session_meta",
            "text:child task",
            "request_begin",
            "text:child answer",
            "token_usage",
            "request_end"
        ]
    );
    parent.dispose().await;
}

#[tokio::test]
async fn argument_and_spawn_errors_are_readable_outputs() {
    let fx = fixture();
    fx.model.script(
        "parent task",
        vec![
            vec![
                call(RUN_SUBAGENT, json!({}), "c1"),
                call(RUN_SUBAGENT, json!({"prompt": " \n "}), "c2"),
                call(RUN_SUBAGENT, json!({"prompt": "x", "model_id": "m"}), "c3"),
                call(
                    RUN_SUBAGENT,
                    json!({"prompt": "x", "agent_id": "ghost"}),
                    "c4",
                ),
                call(
                    RUN_SUBAGENT,
                    json!({"prompt": "x", "provider": "nope", "model_id": "none"}),
                    "c5",
                ),
                call(INPUT_SUBAGENT, json!({}), "c6"),
                call(
                    INPUT_SUBAGENT,
                    json!({"subagent_id": "subagent-00000000"}),
                    "c7",
                ),
            ],
            text("done"),
        ],
    );
    let parent = fx.session();
    let stream = run(&parent, "parent task", allow()).await;
    let mut got = outputs(&stream);
    got.sort_by(|a, b| a.0.cmp(&b.0));
    let mut want: Vec<(String, StopReason)> = [
        MISSING_PROMPT_TEXT.to_owned(),
        MISSING_PROMPT_TEXT.to_owned(),
        MODEL_PAIR_TEXT.to_owned(),
        "[run_subagent error: subagent error: agent \"ghost\" does not exist or is not accessible]"
            .to_owned(),
        "[run_subagent error: model nope/none is not configured in this project]".to_owned(),
        "Missing required argument \"subagent_id\" for input_subagent.".to_owned(),
        "[input_subagent error: unknown subagent_id subagent-00000000 (the session may have finished and been cleared)]".to_owned(),
    ]
    .into_iter()
    .map(|t| (t, StopReason::Failed))
    .collect();
    want.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got, want);
    assert!(child_ids(&stream).is_empty());
    parent.dispose().await;
}

#[tokio::test]
async fn the_depth_limit_holds_in_the_tool_list_and_in_the_runner() {
    let fx = fixture();
    let top = fx.session();
    let names = |s: &Session| s.tools().into_iter().map(|t| t.name).collect::<Vec<_>>();
    assert!(names(&top).contains(&RUN_SUBAGENT.to_owned()));
    assert!(names(&top).contains(&INPUT_SUBAGENT.to_owned()));
    let nested = fx
        .agent
        .create_session(SessionOptions {
            workspace_dir: Some(fx.workspace.clone()),
            model: Some(ModelEntry::new("scripted", "m")),
            client: Some(Arc::new(fx.model.clone())),
            depth: 1,
            ..SessionOptions::default()
        })
        .unwrap();
    assert!(!names(&nested).iter().any(|n| is_subagent_tool(n)));

    // A runner at depth 1 refuses, also when its tool is wired by hand.
    let manager = Arc::new(SubagentManager::new(SpawnContext {
        agent: fx.agent.clone(),
        model: ModelEntry::new("scripted", "m"),
        client: Arc::new(fx.model.clone()),
        workspace: fx.workspace.clone(),
        thinking: crate::llm::ThinkingLevel::Medium,
        depth: 1,
    }));
    let def = crate::config::default_tool_definitions()
        .into_iter()
        .find(|d| d.name == RUN_SUBAGENT)
        .unwrap();
    let services = ToolServices::default().with_subagents(manager);
    let env = Environment::with_tools(
        &fx.workspace,
        vec![run_subagent_factory(def, &services)],
        services,
    );
    let (tx, mut rx) = mpsc::channel(64);
    let out = env
        .execute_tool(
            &ToolCallPayload {
                role: Role::Assistant,
                name: RUN_SUBAGENT.into(),
                arguments: json!({"prompt": "go deeper"}).to_string(),
                tool_call_id: "c1".into(),
                stop_reason: StopReason::Completed,
                fidelity: None,
            },
            &CancellationToken::new(),
            Some(allow()),
            &tx,
        )
        .await;
    drop(tx);
    while rx.recv().await.is_some() {}
    assert_eq!(
        (out.output.as_str(), out.stop_reason),
        (
            "[run_subagent error: subagent depth limit 1 reached; not spawning another subagent]",
            StopReason::Failed
        )
    );
    top.dispose().await;
}

/// Allows everything and records what it was asked; holds the child's calls while `hold`.
struct Recording {
    seen: Mutex<Vec<OmniMessage>>,
    hold_children: bool,
}

#[async_trait]
impl Approver for Recording {
    async fn approve(&self, tool_call: &OmniMessage) -> Result<Decision, ApprovalError> {
        self.seen.lock().unwrap().push(tool_call.clone());
        if self.hold_children && tool_call.has_origin() {
            std::future::pending::<()>().await;
        }
        Ok(Decision::Allow)
    }
}

#[tokio::test]
async fn child_tool_calls_are_approved_by_the_parent_approver_with_origin() {
    let fx = fixture();
    fx.model.script(
        "parent task",
        vec![
            vec![call(RUN_SUBAGENT, json!({"prompt": "child task"}), "c1")],
            text("parent done"),
        ],
    );
    fx.model.script(
        "child task",
        vec![
            vec![call("probe_tool", json!({"x": 1}), "k1")],
            text("child answer"),
        ],
    );
    let parent = fx.session();
    let approver = Arc::new(Recording {
        seen: Mutex::new(vec![]),
        hold_children: false,
    });
    let stream = run(&parent, "parent task", approver.clone()).await;
    let child = child_ids(&stream)[0].clone();
    let seen = approver.seen.lock().unwrap().clone();
    let asked: Vec<(Option<Vec<String>>, String)> = seen
        .iter()
        .map(|m| (m.origin.clone(), m.as_tool_call().unwrap().name.clone()))
        .collect();
    assert_eq!(
        asked,
        [
            (None, RUN_SUBAGENT.to_owned()),
            (Some(vec![child.clone()]), "probe_tool".to_owned())
        ]
    );
    // The child's decision and output pass through tagged; the round's text is the answer.
    let child_events: Vec<String> = stream
        .iter()
        .filter(|m| m.origin.as_deref() == Some(&[child.clone()][..]))
        .filter(|m| !is_partial_payload(m))
        .map(kind)
        .filter(|k| k.starts_with("decision") || k.starts_with("output"))
        .collect();
    assert_eq!(
        child_events,
        ["decision:allow", "output:Unknown tool: probe_tool"]
    );
    assert_eq!(
        outputs(&stream),
        [("child answer".to_owned(), StopReason::Completed)]
    );
    parent.dispose().await;
}

#[tokio::test]
async fn a_backgrounded_child_is_polled_then_given_a_follow_up() {
    let fx = fixture();
    let gate = Arc::new(Semaphore::new(0));
    fx.model.script(
        "parent task",
        vec![
            vec![call(
                RUN_SUBAGENT,
                json!({"prompt": "child task", "yield_time_ms": 250}),
                "c1",
            )],
            vec![Step::EmitWith(|m| {
                tool_call(
                    INPUT_SUBAGENT,
                    json!({"subagent_id": ids_in(m)[0], "prompt": "more"}).to_string(),
                    "c2",
                    StopReason::Completed,
                )
            })],
            vec![
                Step::Open(gate.clone()),
                Step::EmitWith(|m| {
                    tool_call(
                        INPUT_SUBAGENT,
                        json!({"subagent_id": ids_in(m)[0]}).to_string(),
                        "c3",
                        StopReason::Completed,
                    )
                }),
            ],
            vec![Step::EmitWith(|m| {
                tool_call(
                    INPUT_SUBAGENT,
                    json!({"subagent_id": ids_in(m)[0], "prompt": "again"}).to_string(),
                    "c4",
                    StopReason::Completed,
                )
            })],
            text("parent done"),
        ],
    );
    fx.model.script(
        "child task",
        vec![
            {
                let mut s = vec![Step::Wait(gate.clone())];
                s.extend(text("first answer"));
                s
            },
            text("second answer"),
        ],
    );
    let parent = fx.session();
    let stream = run(&parent, "parent task", allow()).await;
    let child = child_ids(&stream)[0].clone();
    let id = format!("subagent-{}", &child[child.len() - 8..]);
    assert_eq!(
        outputs(&stream),
        [
            (running_note(&id), StopReason::Completed),
            (still_running_error(&id), StopReason::Failed),
            (
                format!("first answer\n{}", idle_note(&id)),
                StopReason::Completed
            ),
            (
                format!("second answer\n{}", idle_note(&id)),
                StopReason::Completed
            ),
        ]
    );
    // One session_meta, one pointer, however many windows the child went through.
    assert_eq!(child_ids(&stream), std::slice::from_ref(&child));
    let trace = read_trace(parent.trace_path()).unwrap();
    let pointers = kinds(&trace)
        .into_iter()
        .filter(|k| k.starts_with("subagent:"))
        .collect::<Vec<_>>();
    assert_eq!(pointers, [format!("subagent:{child}")]);
    assert_eq!(
        kinds(&fx.child_trace(&child))
            .into_iter()
            .filter(|k| k.starts_with("text:"))
            .collect::<Vec<_>>(),
        [
            "text:child task",
            "text:first answer",
            "text:again",
            "text:second answer"
        ]
    );
    parent.dispose().await;
}

#[tokio::test]
async fn an_aborted_poll_leaves_the_child_running() {
    let fx = fixture();
    let gate = Arc::new(Semaphore::new(0));
    fx.model.script(
        "parent task",
        vec![
            vec![call(
                RUN_SUBAGENT,
                json!({"prompt": "child task", "yield_time_ms": 250}),
                "c1",
            )],
            vec![Step::EmitWith(|m| {
                tool_call(
                    INPUT_SUBAGENT,
                    json!({"subagent_id": ids_in(m)[0], "yield_time_ms": 60000}).to_string(),
                    "c2",
                    StopReason::Completed,
                )
            })],
        ],
    );
    fx.model.script(
        "child task",
        vec![{
            let mut s = vec![Step::Wait(gate.clone())];
            s.extend(text("late answer"));
            s
        }],
    );
    let parent = fx.session();
    let mut handle = parent
        .run(
            vec![user_text("parent task")],
            RunOptions {
                approver: Some(allow()),
                thinking: None,
            },
        )
        .unwrap();
    let mut stream = Vec::new();
    while let Some(m) = handle.next().await {
        let poll_started = matches!(m.model(), Some(ModelPayload::PartialToolCallOutput(p)) if p.tool_call_id == "c2" && p.event_type == EventType::Start);
        stream.push(m);
        if poll_started {
            handle.abort();
        }
    }
    let child = child_ids(&stream)[0].clone();
    let id = format!("subagent-{}", &child[child.len() - 8..]);
    assert_eq!(
        outputs(&stream),
        [
            (running_note(&id), StopReason::Completed),
            (
                crate::environment::ABORTED_NOTE.to_owned(),
                StopReason::Aborted
            ),
        ]
    );
    assert_eq!(kind(stream.last().unwrap()), "abort:aborted by user");

    // The child lived on: a later task polls its answer (the parent's script goes on: its
    // context still starts with the first prompt).
    fx.model.script(
        "parent task",
        vec![
            vec![
                Step::Open(gate.clone()),
                call(INPUT_SUBAGENT, json!({"subagent_id": id.clone()}), "c3"),
            ],
            text("ok"),
        ],
    );
    let stream = run(&parent, "next task", allow()).await;
    assert_eq!(
        outputs(&stream),
        [(
            format!("late answer\n{}", idle_note(&id)),
            StopReason::Completed
        )]
    );
    parent.dispose().await;
}

#[tokio::test]
async fn aborting_the_parent_inside_the_window_kills_the_child() {
    let fx = fixture();
    let gate = Arc::new(Semaphore::new(0));
    fx.model.script(
        "parent task",
        vec![vec![call(
            RUN_SUBAGENT,
            json!({"prompt": "child task"}),
            "c1",
        )]],
    );
    fx.model.script("child task", vec![vec![Step::Wait(gate)]]);
    let parent = fx.session();
    let mut handle = parent
        .run(
            vec![user_text("parent task")],
            RunOptions {
                approver: Some(allow()),
                thinking: None,
            },
        )
        .unwrap();
    let mut stream = Vec::new();
    while let Some(m) = handle.next().await {
        let child_requesting = m.has_origin() && kind(&m) == "request_begin";
        stream.push(m);
        if child_requesting {
            handle.abort();
        }
    }
    let child = child_ids(&stream)[0].clone();
    assert_eq!(
        outputs(&stream),
        [(
            crate::environment::ABORTED_NOTE.to_owned(),
            StopReason::Aborted
        )]
    );
    // The child's own abort passed through before the call reported, and the parent ended last.
    let tail: Vec<String> = stream
        .iter()
        .filter(|m| !is_partial_payload(m))
        .rev()
        .take(3)
        .map(|m| format!("{}{}", if m.has_origin() { "child " } else { "" }, kind(m)))
        .collect();
    assert_eq!(
        tail,
        [
            "abort:aborted by user".to_owned(),
            format!("output:{}", crate::environment::ABORTED_NOTE),
            "child abort:aborted by user".to_owned(),
        ]
    );
    assert_eq!(
        kind(fx.child_trace(&child).last().unwrap()),
        "abort:aborted by user"
    );
    parent.dispose().await;
}

#[tokio::test]
async fn eight_running_children_fill_the_cap_and_finished_ones_make_room() {
    let fx = fixture();
    let gate = Arc::new(Semaphore::new(0));
    let spawn_eight: Vec<Step> = (1..=8)
        .map(|i| {
            call(
                RUN_SUBAGENT,
                json!({"prompt": format!("child {i}"), "yield_time_ms": 250}),
                &format!("s{i}"),
            )
        })
        .collect();
    fx.model.script(
        "parent task",
        vec![
            spawn_eight,
            vec![call(RUN_SUBAGENT, json!({"prompt": "child 9"}), "s9")],
            vec![
                Step::Open(gate.clone()),
                Step::EmitWith(|m| {
                    // The request's input is the ninth call's output; the ids are further up.
                    tool_call(
                        INPUT_SUBAGENT,
                        json!({"subagent_id": ids_in(m)[0]}).to_string(),
                        "p1",
                        StopReason::Completed,
                    )
                }),
            ],
            vec![call(RUN_SUBAGENT, json!({"prompt": "child 10"}), "s10")],
            vec![Step::EmitWith(|m| {
                tool_call(
                    INPUT_SUBAGENT,
                    json!({"subagent_id": ids_in(m)[0]}).to_string(),
                    "p2",
                    StopReason::Completed,
                )
            })],
            text("parent done"),
        ],
    );
    for i in 1..=8 {
        let mut s = vec![Step::Wait(if i == 1 {
            gate.clone()
        } else {
            Arc::new(Semaphore::new(0))
        })];
        s.extend(text(&format!("answer {i}")));
        fx.model.script(&format!("child {i}"), vec![s]);
    }
    fx.model.script("child 10", vec![text("answer 10")]);
    let parent = fx.session();
    let stream = run(&parent, "parent task", allow()).await;
    let got = outputs(&stream);
    assert_eq!(got.len(), 8 + 4, "{got:?}");
    let ids: Vec<String> = child_ids(&stream)
        .iter()
        .map(|c| format!("subagent-{}", &c[c.len() - 8..]))
        .collect();
    // Children 1..8 were registered (in completion order), the ninth refused before spawning.
    let mut first: Vec<String> = got[..8].iter().map(|(o, _)| o.clone()).collect();
    first.sort();
    let mut want: Vec<String> = ids[..8].iter().map(|id| running_note(id)).collect();
    want.sort();
    assert_eq!(first, want);
    let first_child_output = stream
        .iter()
        .filter_map(|m| m.as_tool_call_output())
        .find(|o| o.tool_call_id == "s1")
        .cloned()
        .unwrap();
    let one = ids_in(&[model_msg(ModelPayload::ToolCallOutput(first_child_output))])[0].clone();
    assert_eq!(
        got[8..].to_vec(),
        [
            (TOO_MANY_TEXT.to_owned(), StopReason::Failed),
            (
                format!("answer 1\n{}", idle_note(&one)),
                StopReason::Completed
            ),
            ("answer 10".to_owned(), StopReason::Completed),
            (unknown_id_text(&one), StopReason::Failed),
        ]
    );
    parent.dispose().await;
}

#[tokio::test]
async fn unanswered_approvals_wait_and_disposal_denies_them() {
    let fx = fixture();
    fx.model.script(
        "parent task",
        vec![
            vec![call(
                RUN_SUBAGENT,
                json!({"prompt": "child task", "yield_time_ms": 250}),
                "c1",
            )],
            text("parent done"),
        ],
    );
    fx.model.script(
        "child task",
        vec![
            vec![call("probe_tool", json!({}), "k1")],
            text("never reached"),
        ],
    );
    let parent = fx.session();
    let approver = Arc::new(Recording {
        seen: Mutex::new(vec![]),
        hold_children: true,
    });
    let stream = run(&parent, "parent task", approver.clone()).await;
    let child = child_ids(&stream)[0].clone();
    let id = format!("subagent-{}", &child[child.len() - 8..]);
    assert_eq!(
        outputs(&stream),
        [(
            format!("{}{}", running_note(&id), approval_hint(1)),
            StopReason::Completed
        )]
    );
    // Disposal kills the child and waits for it: its task ended with an abort, and the call
    // that waited for approval was never decided.
    parent.dispose().await;
    let trace = kinds(&fx.child_trace(&child));
    assert_eq!(
        trace.last().map(String::as_str),
        Some("abort:aborted by user")
    );
    assert!(
        !trace.iter().any(|k| k.starts_with("decision")),
        "{trace:?}"
    );
}

#[test]
fn the_yield_clamp() {
    let cases: &[(Option<Value>, f64, i64, u64)] = &[
        (None, 300_000.0, 600_000, 300_000),
        (Some(json!(10)), 300_000.0, 600_000, 250),
        (Some(json!(-5)), 10_000.0, 600_000, 250),
        (Some(json!(1e12)), 300_000.0, 600_000, 599_000),
        (Some(json!("soon")), 10_000.0, 600_000, 10_000),
        (Some(json!(900.5)), 10_000.0, 600_000, 900),
        (Some(json!(5000)), 300_000.0, 1_000, 250),
        (Some(json!(1e300)), 300_000.0, 0, MAX_YIELD_MS as u64),
    ];
    for (raw, default, timeout, want) in cases {
        assert_eq!(
            clamp_yield(raw.as_ref(), *default, *timeout).as_millis() as u64,
            *want,
            "{raw:?} {default} {timeout}"
        );
    }
}

#[tokio::test]
async fn rounds_start_only_on_a_live_idle_child_and_a_refused_run_is_a_subagent_error() {
    let fx = fixture();
    let gate = Arc::new(Semaphore::new(0));
    fx.model
        .script("held", vec![vec![Step::Wait(gate.clone())]]);
    let child = ChildSession::new(fx.session());
    child.start_run("held").unwrap();
    assert!(child.running());
    assert!(matches!(
        child.start_run("again"),
        Err(session::StartError::Running)
    ));
    child.kill();
    assert!(child.wait_idle(std::time::Duration::from_secs(5)).await);
    assert!(matches!(
        child.start_run("again"),
        Err(session::StartError::Killed)
    ));
    assert_eq!(
        child.exit(),
        Some(RoundExit {
            status: StopReason::Failed,
            note: Some("[subagent aborted: aborted by user]".into()),
        })
    );

    let disposed = fx.session();
    disposed.dispose().await;
    let child = ChildSession::new(disposed.clone());
    child.start_run("anything").unwrap();
    assert!(!child.running());
    assert_eq!(
        child.exit(),
        Some(RoundExit {
            status: StopReason::Failed,
            note: Some(format!(
                "[subagent error: session {} has been disposed]",
                disposed.id()
            )),
        })
    );
}

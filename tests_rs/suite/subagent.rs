//! Subagents end to end: a parent session on a real agent folder whose model is a scripted
//! Chat Completions server on 127.0.0.1, children that run real `bash -lc` commands, traces
//! read back from disk.
//!
//! Children that inherit the model share the parent's server; their requests then arrive in a
//! fixed order because the parent waits for its tool. Tests where the parent and a child talk
//! to the model at the same time give the child its own model (`provider` + `model_id` naming
//! a second server), so no reply can go to the wrong session. A child is held "running" by a
//! reply that stalls or by an approval the test has not granted yet, never by a race against
//! the clock; waits for asynchronous facts (a process dying, a file appearing) poll the
//! condition with a generous bound.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use penguin_harness_core::approval::{ApprovalError, Approver, Decision};
use penguin_harness_core::config::{
    ClientType, ModelRef, ProjectConfig, ReconnectSettings, SystemConfig,
};
use penguin_harness_core::engine::RunOptions;
use penguin_harness_core::llm::ThinkingLevel;
use penguin_harness_core::protocol::{
    Body, EventPayload, ModelPayload, OmniMessage, SessionSource, StopReason, is_partial_payload,
    user_text,
};
use penguin_harness_core::session::{AgentPaths, paths::session_date};
use penguin_harness_core::tools::subagent::{SpawnContext, SpawnRequest, SubagentManager};
use penguin_harness_core::trace::read_trace;
use penguin_harness_core::{Agent, Session, SessionOptions};
use penguin_harness_tests::sse::openai;
use penguin_harness_tests::{Reply, ScriptedServer, TempDir, llm};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

// ---------------------------------------------------------------------------------------------
// Rig

struct Rig {
    _root: TempDir,
    ws: TempDir,
    /// The parent's model (`scripted/parent-model`, the project default).
    parent: ScriptedServer,
    /// `scripted/child-model`, for children that are given their own model.
    child: ScriptedServer,
    agent: Agent,
}

async fn rig(parent: Vec<Reply>, child: Vec<Reply>) -> Rig {
    let root = TempDir::new("subagent-root");
    let ws = TempDir::new("subagent-ws");
    let parent = ScriptedServer::start(parent).await;
    let child = ScriptedServer::start(child).await;
    let paths = AgentPaths::new(root.path(), "proj", "main");

    let mut project = ProjectConfig::default();
    for (model_id, server) in [("parent-model", &parent), ("child-model", &child)] {
        let mut entry = llm::entry(ClientType::OpenAiChat, &server.openai_base_url());
        entry.model_id = model_id.into();
        project.models.push(entry);
    }
    project.default_model = Some(ModelRef {
        provider: "scripted".into(),
        model_id: "parent-model".into(),
    });
    project
        .save(&paths.project_config())
        .unwrap_or_else(|e| panic!("{e}"));

    // No reconnects: a request beyond the script fails the task at once instead of waiting.
    let system = SystemConfig {
        reconnect: ReconnectSettings {
            max_retries: 0,
            base_delay_ms: 1,
        },
        ..SystemConfig::default()
    };
    std::fs::create_dir_all(paths.agent_state()).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        paths.system_config(),
        system.to_yaml().unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));

    let agent = Agent::open(Some(root.path()), "proj", "main").unwrap_or_else(|e| panic!("{e}"));
    Rig {
        _root: root,
        ws,
        parent,
        child,
        agent,
    }
}

impl Rig {
    fn session(&self) -> Session {
        self.agent
            .create_session(SessionOptions {
                workspace_dir: Some(self.ws.path().to_path_buf()),
                ..SessionOptions::default()
            })
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn trace_of(&self, session_id: &str) -> PathBuf {
        let date = session_date(session_id).unwrap_or_else(|| panic!("bad id {session_id}"));
        self.agent.paths().trace_file(date, session_id, 1)
    }
}

/// Decides like a user would, recording what it was asked. Origin-tagged (child) calls wait
/// for a permit of `child_gate` and then get `child_decision`; the parent's own calls are
/// allowed at once.
struct TestApprover {
    seen: Mutex<Vec<OmniMessage>>,
    child_gate: Arc<Semaphore>,
    child_decision: Decision,
}

impl TestApprover {
    fn new(child_decision: Decision, open: bool) -> Arc<Self> {
        Arc::new(TestApprover {
            seen: Mutex::new(Vec::new()),
            child_gate: Arc::new(Semaphore::new(if open {
                Semaphore::MAX_PERMITS
            } else {
                0
            })),
            child_decision,
        })
    }

    /// (origin, tool name) of every request, in order.
    fn asked(&self) -> Vec<(Option<Vec<String>>, String)> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|m| {
                let name = m.as_tool_call().map(|c| c.name.clone()).unwrap_or_default();
                (m.origin.clone(), name)
            })
            .collect()
    }
}

#[async_trait]
impl Approver for TestApprover {
    async fn approve(&self, tool_call: &OmniMessage) -> Result<Decision, ApprovalError> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tool_call.clone());
        if !tool_call.has_origin() {
            return Ok(Decision::Allow);
        }
        let permit = self
            .child_gate
            .acquire()
            .await
            .map_err(|e| ApprovalError::new(e.to_string()))?;
        permit.forget();
        Ok(self.child_decision)
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
        .unwrap_or_else(|e| panic!("{e}"))
        .collect()
        .await
}

fn calls(list: &[(&str, &str, Value)]) -> Reply {
    let owned: Vec<(String, String, String)> = list
        .iter()
        .map(|(id, name, args)| ((*id).to_owned(), (*name).to_owned(), args.to_string()))
        .collect();
    let refs: Vec<(&str, &str, &str)> = owned
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    Reply::sse(openai::tool_calls(&refs))
}

fn text(answer: &str) -> Reply {
    Reply::sse(openai::text(answer))
}

/// A reply that never completes while the test lasts (the request is cancelled when the child
/// is killed).
fn stalled() -> Reply {
    Reply::stall(String::new(), Duration::from_secs(600))
}

/// The parent's own complete tool outputs `(tool_call_id, output, stop)`, in stream order.
fn outputs(stream: &[OmniMessage]) -> Vec<(String, String, StopReason)> {
    stream
        .iter()
        .filter(|m| !m.has_origin())
        .filter_map(|m| m.as_tool_call_output())
        .map(|o| (o.tool_call_id.clone(), o.output.clone(), o.stop_reason))
        .collect()
}

fn output_of(stream: &[OmniMessage], call_id: &str) -> (String, StopReason) {
    outputs(stream)
        .into_iter()
        .find(|(id, _, _)| id == call_id)
        .map(|(_, o, s)| (o, s))
        .unwrap_or_else(|| panic!("no output for {call_id}"))
}

/// Session ids of the children whose `session_meta` passed through, in stream order.
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

fn subagent_id(child_session_id: &str) -> String {
    format!(
        "subagent-{}",
        &child_session_id[child_session_id.len() - 8..]
    )
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
            EventPayload::RequestEnd(r) => format!("request_end:{}", r.status.as_str()),
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

/// The complete messages a child forwarded, as kinds.
fn forwarded_kinds(stream: &[OmniMessage], child: &str) -> Vec<String> {
    stream
        .iter()
        .filter(|m| m.origin.as_deref() == Some(&[child.to_owned()][..]))
        .filter(|m| !is_partial_payload(m))
        .map(kind)
        .collect()
}

fn tool_names(request_body: &Value) -> Vec<String> {
    request_body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

async fn eventually(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..500 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{what} never happened");
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

// ---------------------------------------------------------------------------------------------
// Tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_runs_a_command_and_its_answer_becomes_the_tool_output() {
    let rig = rig(
        vec![
            calls(&[(
                "call_run",
                "run_subagent",
                json!({"prompt": "What does the note say?"}),
            )]),
            // The child inherits the parent's model: its two requests come next, in order.
            Reply::sse(openai::exec("call_cat", "cat note.txt")),
            text("The note says hello"),
            text("Done."),
        ],
        vec![],
    )
    .await;
    std::fs::write(rig.ws.path().join("note.txt"), "hello").unwrap_or_else(|e| panic!("{e}"));
    let parent = rig.session();
    let approver = TestApprover::new(Decision::Allow, true);
    let stream = run(&parent, "Ask a helper about the note.", approver.clone()).await;

    let children = child_ids(&stream);
    assert_eq!(children.len(), 1, "{:?}", kinds(&stream));
    let child = children[0].clone();
    assert_eq!(
        output_of(&stream, "call_run"),
        ("The note says hello".to_owned(), StopReason::Completed)
    );

    // The child's whole task reached the parent's consumer, tagged with its id.
    assert!(
        stream
            .iter()
            .filter_map(|m| m.origin.as_ref())
            .all(|o| *o == [child.clone()])
    );
    assert_eq!(
        forwarded_kinds(&stream, &child),
        [
            "session_meta",
            "request_begin",
            "tool_call:exec_command",
            "decision:allow",
            "token_usage",
            "request_end:completed",
            "output:hello",
            "request_begin",
            "text:The note says hello",
            "token_usage",
            "request_end:completed",
        ]
    );
    // The child's call was put to the parent's approver, tagged with the child's id.
    assert_eq!(
        approver.asked(),
        [
            (None, "run_subagent".to_owned()),
            (Some(vec![child.clone()]), "exec_command".to_owned()),
        ]
    );

    // The parent's trace holds one pointer to the child and nothing of the child's messages.
    let trace = kinds(&read_trace(parent.trace_path()).unwrap_or_else(|e| panic!("{e}")));
    let pointer = format!("subagent:{child}");
    assert_eq!(trace.iter().filter(|k| **k == pointer).count(), 1);
    let pos = |k: &str| trace.iter().position(|t| t == k);
    assert!(pos("decision:allow") < pos(&pointer));
    assert!(pos(&pointer) < pos("output:The note says hello"));
    assert_eq!(
        trace
            .iter()
            .filter(|k| **k != pointer)
            .map(String::as_str)
            .collect::<Vec<_>>(),
        [
            "session_meta",
            "text:Ask a helper about the note.",
            "request_begin",
            "tool_call:run_subagent",
            "decision:allow",
            "token_usage",
            "request_end:completed",
            "output:The note says hello",
            "request_begin",
            "text:Done.",
            "token_usage",
            "request_end:completed",
        ]
    );

    // The child has a trace of its own, marked as a subagent session.
    let child_path = rig.trace_of(&child);
    let first_line: Value = serde_json::from_str(
        std::fs::read_to_string(&child_path)
            .unwrap_or_else(|e| panic!("{e}"))
            .lines()
            .next()
            .unwrap_or_default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first_line["type"], "session_meta");
    assert_eq!(first_line["payload"]["source"], "subagent");
    assert_eq!(first_line["payload"]["session_id"], child.as_str());
    assert_eq!(first_line["payload"]["model_id"], "parent-model");
    assert_eq!(
        first_line["payload"]["workspace"],
        rig.ws.path().display().to_string()
    );
    let child_trace = read_trace(&child_path).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(&child_trace[0].body, Body::SessionMeta(m) if m.source == Some(SessionSource::Subagent))
    );
    assert_eq!(
        kinds(&child_trace),
        [
            "session_meta",
            "text:What does the note say?",
            "request_begin",
            "tool_call:exec_command",
            "decision:allow",
            "token_usage",
            "request_end:completed",
            "output:hello",
            "request_begin",
            "text:The note says hello",
            "token_usage",
            "request_end:completed",
        ]
    );

    // Requests: the parent is offered the subagent tools, the child is not (depth limit 1);
    // the parent's follow-up request carries the tool output and nothing of the child's.
    let requests = rig.parent.requests();
    assert_eq!(requests.len(), 4);
    let parent_tools = tool_names(&requests[0].body);
    assert!(
        parent_tools.contains(&"run_subagent".to_owned()),
        "{parent_tools:?}"
    );
    assert!(parent_tools.contains(&"input_subagent".to_owned()));
    let child_tools = tool_names(&requests[1].body);
    assert!(
        child_tools.contains(&"exec_command".to_owned()),
        "{child_tools:?}"
    );
    assert!(
        !child_tools
            .iter()
            .any(|t| t == "run_subagent" || t == "input_subagent")
    );
    let follow_up = &requests[3].body;
    let last = follow_up["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (last["role"].as_str(), last["tool_call_id"].as_str()),
        (Some("tool"), Some("call_run"))
    );
    let body = follow_up.to_string();
    assert!(body.contains("The note says hello"));
    assert!(!body.contains("cat note.txt"), "{body}");
    assert!(!body.contains(&child), "{body}");
    parent.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_child_call_never_runs() {
    let rig = rig(
        vec![
            calls(&[(
                "call_run",
                "run_subagent",
                json!({"prompt": "Create the marker file."}),
            )]),
            Reply::sse(openai::exec("call_touch", "touch marker")),
            text("I was not allowed to."),
            text("Understood."),
        ],
        vec![],
    )
    .await;
    let parent = rig.session();
    let approver = TestApprover::new(Decision::Deny, true);
    let stream = run(&parent, "Delegate it.", approver.clone()).await;
    let child = child_ids(&stream)[0].clone();
    let forwarded = forwarded_kinds(&stream, &child);
    assert_eq!(
        forwarded[2..5],
        [
            "tool_call:exec_command",
            "decision:deny",
            "output:Tool call denied by user."
        ]
    );
    assert_eq!(
        approver.asked(),
        [
            (None, "run_subagent".to_owned()),
            (Some(vec![child.clone()]), "exec_command".to_owned()),
        ]
    );
    assert!(!rig.ws.path().join("marker").exists());
    assert_eq!(
        output_of(&stream, "call_run"),
        ("I was not allowed to.".to_owned(), StopReason::Completed)
    );
    parent.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_child_is_polled_and_given_a_follow_up() {
    let model = json!({"provider": "scripted", "model_id": "child-model"});
    let rig = rig(
        vec![
            calls(&[(
                "call_run",
                "run_subagent",
                json!({"prompt": "Count the files.", "provider": model["provider"],
                       "model_id": model["model_id"], "yield_time_ms": 250}),
            )]),
            text("Started a helper."),
        ],
        vec![
            // The child's first call waits for an approval the test grants only later.
            Reply::sse(openai::exec("call_count", "printf two")),
            text("There are two."),
            text("Still two."),
        ],
    )
    .await;
    let parent = rig.session();
    let approver = TestApprover::new(Decision::Allow, false);
    let first = run(
        &parent,
        "Count the files in the background.",
        approver.clone(),
    )
    .await;
    let child = child_ids(&first)[0].clone();
    let id = subagent_id(&child);
    let running = format!(
        "[subagent running with subagent_id {id}; use input_subagent to poll for progress or send a follow-up prompt]"
    );
    let (note, stop) = output_of(&first, "call_run");
    assert_eq!(stop, StopReason::Completed);
    // Whether the child reached its approval before the 250 ms window closed is up to the
    // clock; either way the call is queued and the note says so when it was.
    assert!(
        note == running
            || note
                == format!(
                    "{running} [subagent is waiting for approval of 1 tool call(s); poll to review]"
                ),
        "{note}"
    );
    assert_eq!(
        kind(first.last().unwrap_or_else(|| panic!("empty"))),
        "request_end:completed"
    );

    // Second task: a prompt while it runs is refused, a poll serves the approval and collects
    // the answer, then a follow-up starts another round of the same child.
    rig.parent.push(calls(&[(
        "call_early",
        "input_subagent",
        json!({"subagent_id": id, "prompt": "Hurry up."}),
    )]));
    rig.parent.push(calls(&[(
        "call_poll",
        "input_subagent",
        json!({"subagent_id": id}),
    )]));
    rig.parent.push(calls(&[(
        "call_again",
        "input_subagent",
        json!({"subagent_id": id, "prompt": "Count again."}),
    )]));
    rig.parent.push(text("All done."));
    let asked_before = approver.asked().len();
    approver.child_gate.add_permits(1);
    let second = run(&parent, "Check on it.", approver.clone()).await;
    let idle =
        format!("[subagent idle with subagent_id {id}; send a follow-up prompt to continue]");
    assert_eq!(
        outputs(&second),
        [
            (
                "call_early".to_owned(),
                format!(
                    "[input_subagent error: subagent {id} is still running; poll with an empty prompt to collect progress first]"
                ),
                StopReason::Failed
            ),
            (
                "call_poll".to_owned(),
                format!("There are two.\n{idle}"),
                StopReason::Completed
            ),
            (
                "call_again".to_owned(),
                format!("Still two.\n{idle}"),
                StopReason::Completed
            ),
        ]
    );
    // The poll's window put the child's queued call to the approver; it ran for real.
    assert_eq!(
        approver.asked()[asked_before..],
        [
            (None, "input_subagent".to_owned()),
            (None, "input_subagent".to_owned()),
            (Some(vec![child.clone()]), "exec_command".to_owned()),
            (None, "input_subagent".to_owned()),
        ]
    );
    let forwarded = forwarded_kinds(&second, &child);
    assert!(
        forwarded.contains(&"output:two".to_owned()),
        "{forwarded:?}"
    );
    // One session_meta and one pointer in all.
    assert!(child_ids(&second).is_empty());
    let trace = kinds(&read_trace(parent.trace_path()).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(
        trace.iter().filter(|k| k.starts_with("subagent:")).count(),
        1
    );
    // The follow-up continued the same child session and model.
    assert_eq!(
        kinds(&read_trace(&rig.trace_of(&child)).unwrap_or_else(|e| panic!("{e}")))
            .into_iter()
            .filter(|k| k.starts_with("text:"))
            .collect::<Vec<_>>(),
        [
            "text:Count the files.",
            "text:There are two.",
            "text:Count again.",
            "text:Still two."
        ]
    );
    assert_eq!(rig.child.requests().len(), 3);
    parent.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ninth_subagent_is_refused_while_eight_run() {
    let spawn: Vec<(String, Value)> = (1..=9)
        .map(|i| {
            (
                format!("call_{i}"),
                json!({"prompt": format!("Task {i}"), "provider": "scripted",
                       "model_id": "child-model", "yield_time_ms": 250}),
            )
        })
        .collect();
    let eight: Vec<(&str, &str, Value)> = spawn[..8]
        .iter()
        .map(|(id, args)| (id.as_str(), "run_subagent", args.clone()))
        .collect();
    let rig = rig(
        vec![
            calls(&eight),
            calls(&[("call_9", "run_subagent", spawn[8].1.clone())]),
            text("Enough helpers."),
        ],
        (0..8).map(|_| stalled()).collect(),
    )
    .await;
    let parent = rig.session();
    let stream = run(
        &parent,
        "Start nine helpers.",
        TestApprover::new(Decision::Allow, true),
    )
    .await;

    let mut registered: Vec<String> = outputs(&stream)
        .into_iter()
        .filter(|(call, _, _)| call != "call_9")
        .map(|(_, out, stop)| {
            assert_eq!(stop, StopReason::Completed);
            out
        })
        .collect();
    registered.sort();
    let mut expected: Vec<String> = child_ids(&stream)
        .iter()
        .map(|c| {
            format!(
                "[subagent running with subagent_id {}; use input_subagent to poll for progress or send a follow-up prompt]",
                subagent_id(c)
            )
        })
        .collect();
    expected.sort();
    assert_eq!(expected.len(), 8);
    assert_eq!(registered, expected);
    assert_eq!(
        output_of(&stream, "call_9"),
        (
            "[run_subagent error: too many background subagents; poll or finish existing ones first]"
                .to_owned(),
            StopReason::Failed
        )
    );
    // Disposing the parent kills all eight (each child's trace ends with its abort); the
    // ninth was refused before spawning: eight children made eight requests.
    eventually("eight child requests", || rig.child.requests().len() >= 8).await;
    parent.dispose().await;
    assert_eq!(rig.child.requests().len(), 8);
    for child in child_ids(&stream) {
        let trace = kinds(&read_trace(&rig.trace_of(&child)).unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(
            trace.last().map(String::as_str),
            Some("abort:aborted by user"),
            "{trace:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborting_the_parent_in_the_window_kills_the_child_and_its_command() {
    let rig = rig(
        vec![calls(&[(
            "call_run",
            "run_subagent",
            json!({"prompt": "Wait for a long time.", "provider": "scripted",
                   "model_id": "child-model"}),
        )])],
        vec![Reply::sse(openai::exec(
            "call_sleep",
            "sleep 600 & echo $! > sleep.pid; wait",
        ))],
    )
    .await;
    let parent = rig.session();
    let handle = parent
        .run(
            vec![user_text("Delegate the wait.")],
            RunOptions {
                approver: Some(TestApprover::new(Decision::Allow, true)),
                thinking: None,
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let cancel = handle.cancel_token();
    let collector = tokio::spawn(handle.collect());

    let pid_file = rig.ws.path().join("sleep.pid");
    eventually("the child's command starting", || {
        read_pid(&pid_file).is_some()
    })
    .await;
    let pid = read_pid(&pid_file).unwrap_or_else(|| panic!("no pid"));
    assert!(alive(pid));
    cancel.cancel();
    let stream = collector.await.unwrap_or_else(|e| panic!("{e}"));

    assert_eq!(
        output_of(&stream, "call_run"),
        (
            "[interrupted: tool aborted by user]".to_owned(),
            StopReason::Aborted
        )
    );
    assert_eq!(
        kind(stream.last().unwrap_or_else(|| panic!("empty"))),
        "abort:aborted by user"
    );
    let child = child_ids(&stream)[0].clone();
    let forwarded = forwarded_kinds(&stream, &child);
    assert_eq!(
        forwarded[forwarded.len() - 2..],
        [
            "output:[interrupted: tool aborted by user]",
            "abort:aborted by user"
        ]
    );
    eventually("the child's command dying", || !alive(pid)).await;
    let child_trace = kinds(&read_trace(&rig.trace_of(&child)).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(
        child_trace.last().map(String::as_str),
        Some("abort:aborted by user")
    );
    parent.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_refuses_below_depth_one() {
    let rig = rig(vec![], vec![]).await;
    let paths = rig.agent.paths().clone();
    let entry = rig
        .agent
        .project_config()
        .models
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("no model"));
    let manager = SubagentManager::new(SpawnContext {
        agent: rig.agent.clone(),
        client: llm::client(&entry, Duration::from_secs(5)),
        model: entry,
        workspace: rig.ws.path().to_path_buf(),
        thinking: ThinkingLevel::Medium,
        depth: 1,
    });
    let err = manager
        .spawn(&SpawnRequest::default())
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("subagent depth limit 1 reached; not spawning another subagent")
    );
    // Nothing was created for the refused child.
    assert!(
        std::fs::read_dir(paths.traces())
            .map(|d| d.count() == 0)
            .unwrap_or(true)
    );
}

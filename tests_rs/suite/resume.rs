//! Resuming sessions through the public API: a configured model served by the scripted
//! server, a real task, then `Agent::resume_session` rebuilding the history from the trace
//! and appending to the same file.

use std::sync::Arc;

use penguin_harness_core::approval::{Approver, Decision, FixedApprover};
use penguin_harness_core::config::ConfigError;
use penguin_harness_core::protocol::{OmniMessage, user_text};
use penguin_harness_core::{HarnessError, Session, SessionOptions};
use penguin_harness_tests::agent::{TestAgent, kinds, run_task, system_yaml};
use penguin_harness_tests::sse::openai;
use penguin_harness_tests::{Reply, ScriptedServer};
use serde_json::{Value, json};

fn allow() -> Option<Arc<dyn Approver>> {
    Some(Arc::new(FixedApprover(Decision::Allow)))
}

/// A project config listing `models` (model ids of provider `scripted`) at `base_url`; the
/// first is the default.
fn project_toml(base_url: &str, models: &[&str]) -> String {
    models
        .iter()
        .map(|m| {
            format!(
                "[[models]]\nprovider = \"scripted\"\nmodel_id = \"{m}\"\nbase_url = \"{base_url}\"\napi_key = \"k\"\n"
            )
        })
        .collect()
}

fn agent_for(server: &ScriptedServer, models: &[&str]) -> TestAgent {
    TestAgent::with_files(
        &system_yaml(-1, 30_000),
        Some(&project_toml(&server.openai_base_url(), models)),
    )
}

fn new_session(t: &TestAgent) -> Session {
    t.agent
        .create_session(SessionOptions {
            workspace_dir: Some(t.workspace.path().to_path_buf()),
            ..SessionOptions::default()
        })
        .unwrap_or_else(|e| panic!("create session: {e}"))
}

fn body(server: &ScriptedServer, n: usize) -> Value {
    server.requests()[n].body.clone()
}

/// The messages of a Chat Completions request without the system prompt.
fn history(server: &ScriptedServer, n: usize) -> Vec<Value> {
    body(server, n)["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m["role"] != "system")
        .collect()
}

fn lines(session: &Session) -> Vec<String> {
    std::fs::read_to_string(session.trace_path())
        .unwrap_or_else(|e| panic!("{e}"))
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_session_resumes_from_its_trace_and_appends_to_it() {
    let server = ScriptedServer::start(vec![
        Reply::sse(openai::exec("c1", "echo hi")),
        Reply::sse(openai::text("one done")),
        Reply::sse(openai::text("two done")),
    ])
    .await;
    let t = agent_for(&server, &["m"]);
    let first = new_session(&t);
    run_task(&first, "one", allow()).await;
    first.dispose().await;
    let before = lines(&first);
    assert_eq!(
        t.agent.latest_session_id().ok().flatten().as_deref(),
        Some(first.id())
    );

    let resumed = t
        .agent
        .resume_session(first.id(), SessionOptions::default())
        .unwrap_or_else(|e| panic!("resume: {e}"));
    assert_eq!(
        (resumed.trace_path(), resumed.workspace(), resumed.meta()),
        (first.trace_path(), first.workspace(), first.meta())
    );
    let stream = run_task(&resumed, "two", allow()).await;
    assert_eq!(
        kinds(&stream),
        ["begin", "text:two done", "usage", "end:completed"]
    );
    assert_eq!(
        history(&server, 2),
        [
            json!({"role": "user", "content": "one"}),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
                "type": "function", "function": {"name": "exec_command",
                "arguments": "{\"cmd\":\"echo hi\"}"}}]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "hi\n"}),
            json!({"role": "assistant", "content": "one done"}),
            json!({"role": "user", "content": "two"}),
        ]
    );
    // Appended: the old lines, then the prompt and the run (no second session_meta).
    let after = lines(&resumed);
    let mut expected = before.clone();
    expected.push(user_text("two").to_json_line());
    let added: Vec<&OmniMessage> = stream
        .iter()
        .filter(|m| !penguin_harness_core::protocol::is_partial_payload(m))
        .collect();
    expected.extend(added.iter().map(|m| m.to_json_line()));
    // The prompt's timestamp is the engine's: compare it by content, the rest byte for byte.
    assert_eq!(after.len(), expected.len());
    assert_eq!(after[..before.len()], before[..]);
    assert_eq!(after[before.len() + 1..], expected[before.len() + 1..]);
    let prompt: Value = serde_json::from_str(&after[before.len()]).unwrap_or_default();
    assert_eq!(
        prompt["payload"],
        json!({"type": "text", "role": "user", "text": "two", "stop_reason": "completed"})
    );
}

#[tokio::test]
async fn resume_can_switch_to_another_configured_model() {
    let server = ScriptedServer::start(vec![
        Reply::sse(openai::text("from a")),
        Reply::sse(openai::text("from b")),
    ])
    .await;
    let t = agent_for(&server, &["a", "b"]);
    let first = new_session(&t);
    run_task(&first, "one", None).await;
    first.dispose().await;
    assert_eq!(body(&server, 0)["model"], "a");

    let pick = |provider: Option<&str>, model_id: Option<&str>| {
        t.agent.resume_session(
            first.id(),
            SessionOptions {
                provider: provider.map(str::to_owned),
                model_id: model_id.map(str::to_owned),
                ..SessionOptions::default()
            },
        )
    };
    assert!(matches!(
        pick(Some("scripted"), None),
        Err(HarnessError::Config(ConfigError::HalfModelRef))
    ));
    assert!(matches!(
        pick(Some("scripted"), Some("c")),
        Err(HarnessError::Config(ConfigError::UnknownModel { .. }))
    ));
    let resumed = pick(Some("scripted"), Some("b")).unwrap_or_else(|e| panic!("resume: {e}"));
    run_task(&resumed, "two", None).await;
    assert_eq!(body(&server, 1)["model"], "b");
    assert_eq!(history(&server, 1).len(), 3); // one, from a, two
}

#[tokio::test]
async fn sessions_that_cannot_be_resumed_say_why() {
    let server = ScriptedServer::start(vec![Reply::sse(openai::text("ok"))]).await;
    let t = agent_for(&server, &["m"]);
    let unknown = "session-2020-01-01-00-00-00-00000000";
    let err = t
        .agent
        .resume_session(unknown, SessionOptions::default())
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("session session-2020-01-01-00-00-00-00000000 not found in this agent's traces")
    );

    // A trace file without its session_meta.
    let day = t.agent.paths().traces().join("2020-01-02");
    std::fs::create_dir_all(&day).unwrap_or_else(|e| panic!("{e}"));
    let headless = "session-2020-01-02-00-00-00-0000abcd";
    let path = day.join(format!("{headless}_001.jsonl"));
    std::fs::write(&path, format!("{}\n", user_text("hi").to_json_line()))
        .unwrap_or_else(|e| panic!("{e}"));
    let err = t
        .agent
        .resume_session(headless, SessionOptions::default())
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err,
        Some(format!(
            "cannot resume session {headless}: {} has no session_meta line",
            path.display()
        ))
    );
    assert_eq!(t.agent.latest_session_id().ok().flatten(), None);

    // A session whose workspace is gone.
    let gone = penguin_harness_tests::TempDir::new("gone-ws");
    let session = t
        .agent
        .create_session(SessionOptions {
            workspace_dir: Some(gone.path().to_path_buf()),
            ..SessionOptions::default()
        })
        .unwrap_or_else(|e| panic!("{e}"));
    run_task(&session, "hi", None).await;
    session.dispose().await;
    let ws = gone.path().display().to_string();
    drop(gone);
    let err = t
        .agent
        .resume_session(session.id(), SessionOptions::default())
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err,
        Some(format!(
            "cannot resume session {}: its workspace {ws} no longer exists",
            session.id()
        ))
    );
}

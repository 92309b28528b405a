//! Agents and sessions for integration tests: a private data root, a workspace, an inline
//! model pointing at a scripted server, and helpers to run a task and read its trace.

use std::sync::Arc;

use penguin_harness_core::approval::Approver;
use penguin_harness_core::config::{ClientType, ModelEntry};
use penguin_harness_core::engine::RunOptions;
use penguin_harness_core::protocol::{
    Body, EventPayload, ModelPayload, OmniMessage, is_partial_payload, user_text,
};
use penguin_harness_core::trace::read_trace;
use penguin_harness_core::{Agent, Session, SessionOptions};

use crate::TempDir;

/// A data root and a workspace, removed on drop.
pub struct TestAgent {
    /// The data root.
    pub root: TempDir,
    /// The workspace.
    pub workspace: TempDir,
    /// An empty `HOME` for the agent's commands (see [`TestAgent::with_files`]).
    pub home: TempDir,
    /// The opened agent.
    pub agent: Agent,
}

/// `system_config.yaml` for tests: default prompt, fast reconnects, a short idle timeout.
pub fn system_yaml(max_turns: i64, idle_timeout_ms: u64) -> String {
    format!(
        "system_prompt: |\n  You are a test agent in {{{{CWD}}}}.\nmax_turns: {max_turns}\nmodel:\n  max_tokens: 1000\n  timeoutMs: {idle_timeout_ms}\nreconnect:\n  max_retries: 2\n  base_delay_ms: 5\n"
    )
}

impl TestAgent {
    /// An agent whose `system_config.yaml` is `yaml`.
    pub fn with_config(yaml: &str) -> Self {
        Self::with_files(yaml, None)
    }

    /// An agent whose `system_config.yaml` is `yaml` and, when given, whose project's
    /// `.project_config.toml` is `project_toml`.
    pub fn with_files(yaml: &str, project_toml: Option<&str>) -> Self {
        let root = TempDir::new("root");
        if let Some(toml) = project_toml {
            let dir = root.path().join("default_project");
            std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(dir.join(".project_config.toml"), toml)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let workspace = TempDir::new("ws");
        let state = root
            .path()
            .join("default_project/agents/default_agent/agent_state");
        std::fs::create_dir_all(&state).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(state.join("system_config.yaml"), yaml).unwrap_or_else(|e| panic!("{e}"));
        // Commands get an empty HOME through the agent's vault: `bash -lc` then skips the
        // host's login profile, whose start-up cost and occasional stderr noise (e.g. a
        // concurrent pyenv rehash) have nothing to do with what these tests check.
        let home = TempDir::new("home");
        let vault = format!("HOME = {:?}\n", home.path().display().to_string());
        std::fs::write(state.join(".vault.toml"), vault).unwrap_or_else(|e| panic!("{e}"));
        let agent = Agent::open(Some(root.path()), "default_project", "default_agent")
            .unwrap_or_else(|e| panic!("open agent: {e}"));
        TestAgent {
            root,
            workspace,
            home,
            agent,
        }
    }

    /// An agent with [`system_yaml`]`(-1, 30_000)`.
    pub fn new() -> Self {
        Self::with_config(&system_yaml(-1, 30_000))
    }

    /// Lets later sessions' commands run with the host's own `HOME` and login profile (what
    /// users get), by removing the test vault.
    pub fn with_host_profile(self) -> Self {
        let _ = std::fs::remove_file(self.agent.paths().vault());
        self
    }

    /// A session on an inline model served at `base_url`.
    pub fn session(&self, client_type: ClientType, base_url: &str) -> Session {
        self.session_with(client_type, base_url, |_| {})
    }

    /// Like [`TestAgent::session`], with the model entry adjusted by `tweak`.
    pub fn session_with(
        &self,
        client_type: ClientType,
        base_url: &str,
        tweak: impl FnOnce(&mut ModelEntry),
    ) -> Session {
        let mut model = ModelEntry::new("scripted", "scripted-model");
        model.client_type = client_type;
        model.base_url = Some(base_url.to_owned());
        model.api_key = Some("sk-test-secret".to_owned());
        tweak(&mut model);
        self.agent
            .create_session(SessionOptions {
                workspace_dir: Some(self.workspace.path().to_path_buf()),
                model: Some(model),
                ..SessionOptions::default()
            })
            .unwrap_or_else(|e| panic!("create session: {e}"))
    }
}

impl Default for TestAgent {
    fn default() -> Self {
        Self::new()
    }
}

/// Runs one task with a user text and collects the whole stream.
pub async fn run_task(
    session: &Session,
    prompt: &str,
    approver: Option<Arc<dyn Approver>>,
) -> Vec<OmniMessage> {
    run_with(session, vec![user_text(prompt)], approver).await
}

/// Runs one task with the given input messages and collects the whole stream.
pub async fn run_with(
    session: &Session,
    input: Vec<OmniMessage>,
    approver: Option<Arc<dyn Approver>>,
) -> Vec<OmniMessage> {
    session
        .run(
            input,
            RunOptions {
                approver,
                thinking: None,
            },
        )
        .unwrap_or_else(|e| panic!("run: {e}"))
        .collect()
        .await
}

/// The session's trace file, parsed.
pub fn trace_of(session: &Session) -> Vec<OmniMessage> {
    read_trace(session.trace_path()).unwrap_or_else(|e| panic!("read trace: {e}"))
}

/// Asserts the trace is `prefix` followed by the stream minus partials and origin-tagged
/// messages, line for line (the raw file, not just the parsed values).
pub fn assert_trace_is_stream(session: &Session, prefix: &[OmniMessage], stream: &[OmniMessage]) {
    let mut expected: Vec<String> = prefix.iter().map(OmniMessage::to_json_line).collect();
    expected.extend(
        stream
            .iter()
            .filter(|m| !is_partial_payload(m) && !m.has_origin())
            .map(OmniMessage::to_json_line),
    );
    let text = std::fs::read_to_string(session.trace_path()).unwrap_or_else(|e| panic!("{e}"));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        expected.iter().map(String::as_str).collect::<Vec<_>>()
    );
}

/// Compact names for the non-partial messages of a stream, to compare sequences.
pub fn kinds(stream: &[OmniMessage]) -> Vec<String> {
    stream
        .iter()
        .filter(|m| !is_partial_payload(m))
        .map(|m| match &m.body {
            Body::SessionMeta(_) => "meta".to_owned(),
            Body::Model(p) => match p {
                ModelPayload::Text(x) => format!("text:{}", x.text),
                ModelPayload::Thinking(x) => format!("thinking:{}", x.thinking),
                ModelPayload::ToolCall(x) => format!("call:{}", x.tool_call_id),
                ModelPayload::ToolCallOutput(x) => {
                    format!("out:{}:{}", x.tool_call_id, x.stop_reason)
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
                EventPayload::Subagent(s) => format!("subagent:{}", s.session_id),
                other => format!("{other:?}"),
            },
        })
        .collect()
}

/// The complete tool output for `id` in a stream.
pub fn output_of(stream: &[OmniMessage], id: &str) -> Option<String> {
    stream
        .iter()
        .filter_map(|m| m.as_tool_call_output())
        .find(|o| o.tool_call_id == id)
        .map(|o| o.output.clone())
}

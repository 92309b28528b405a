//! Agents and sessions: the public entry point of the core.
//!
//! An [`Agent`] is a folder under the data root (`paths`) holding the agent's configuration;
//! opening one creates the defaults when they are absent. [`Agent::create_session`] resolves
//! the model, the workspace and the system prompt, opens the session's trace, builds the
//! Environment and the engine. [`Session::run`] starts one task on the current tokio runtime
//! and returns a [`RunHandle`], a stream of OmniMessages that ends when the task ends; dropping
//! the handle aborts the task. Runs of one session are serialized.

pub mod paths;
pub mod resume;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::approval::{Approver, Policy, PolicyApprover};
use crate::config::{
    ModelEntry, Permission, ProjectConfig, ProjectFile, SystemConfig, render_template, validate_id,
    write_private_file,
};
use crate::engine::{Engine, EngineSettings, EngineState, ReconnectSkip, RunOptions};
use crate::environment::Environment;
use crate::error::HarnessError;
use crate::llm::{ClientOptions, ModelClient, ThinkingLevel, build_client};
use crate::protocol::{ContextWindow, OmniMessage, SessionMeta, SessionSource, ToolSpec};
use crate::tools::ToolServices;
use crate::tools::exec::CommandSessionManager;
use crate::tools::image::VisionModel;
use crate::tools::subagent::{
    KILL_WAIT as SUBAGENT_KILL_WAIT, MAX_SUBAGENT_DEPTH, SpawnContext, SubagentManager,
    is_subagent_tool,
};
use crate::trace::TraceWriter;
pub use paths::{
    AgentPaths, DEFAULT_AGENT, DEFAULT_PROJECT, default_root, new_session_id, project_config_path,
};

/// Messages buffered between a run and its consumer; a slow consumer slows the run.
const RUN_CHANNEL_CAPACITY: usize = 256;

/// The `.project_config.toml` of `project_id` under `root` (`None` = `$PENGUIN_HOME` or
/// `~/.penguin/data`), to list and edit the project's models without opening an agent.
/// Nothing is created until the first change.
pub fn project_file(root: Option<&Path>, project_id: &str) -> Result<ProjectFile, HarnessError> {
    validate_id("project id", project_id)?;
    let root = root.map(Path::to_path_buf).unwrap_or_else(default_root);
    Ok(ProjectFile::new(project_config_path(&root, project_id)))
}

/// One agent of one project, with its configuration loaded.
#[derive(Clone, Debug)]
pub struct Agent {
    project_id: String,
    agent_id: String,
    paths: AgentPaths,
    system: SystemConfig,
    project: ProjectConfig,
}

/// How to create a session.
#[derive(Clone, Default)]
pub struct SessionOptions {
    /// Workspace; must exist. `None` = a fresh temporary workspace under the agent.
    pub workspace_dir: Option<PathBuf>,
    /// An inline model definition (needs no config file); wins over `provider`/`model_id`.
    pub model: Option<ModelEntry>,
    /// Provider half of a configured model reference.
    pub provider: Option<String>,
    /// Model half of a configured model reference.
    pub model_id: Option<String>,
    /// Default thinking level of the session's runs.
    pub thinking_level: Option<ThinkingLevel>,
    /// Why the session exists (subagents set this).
    pub source: Option<SessionSource>,
    /// A ready model client (embedders and tests); `None` builds one from the model entry.
    pub client: Option<Arc<dyn ModelClient>>,
    /// Nesting depth: 0 for a top-level session, 1 for a subagent. Sessions at
    /// [`MAX_SUBAGENT_DEPTH`] are not offered `run_subagent`/`input_subagent`.
    pub depth: u32,
}

impl Agent {
    /// Opens (creating defaults where absent) `<root>/<project_id>/agents/<agent_id>`;
    /// `root = None` uses `$PENGUIN_HOME` or `~/.penguin/data`.
    pub fn open(
        root: Option<&Path>,
        project_id: &str,
        agent_id: &str,
    ) -> Result<Self, HarnessError> {
        validate_id("project id", project_id)?;
        validate_id("agent id", agent_id)?;
        let root = root.map(Path::to_path_buf).unwrap_or_else(default_root);
        let paths = AgentPaths::new(&root, project_id, agent_id);
        for dir in [paths.agent_state(), paths.traces(), paths.workspaces()] {
            std::fs::create_dir_all(&dir).map_err(|e| HarnessError::io("create", &dir, e))?;
        }
        let system_path = paths.system_config();
        if !system_path.exists() {
            let text = SystemConfig::default().to_yaml()?;
            std::fs::write(&system_path, text)
                .map_err(|e| HarnessError::io("write", &system_path, e))?;
        }
        let agents_md = paths.agents_md();
        if !agents_md.exists() {
            std::fs::write(&agents_md, "").map_err(|e| HarnessError::io("write", &agents_md, e))?;
        }
        let project_path = paths.project_config();
        if !project_path.exists() {
            write_private_file(&project_path, b"")?;
        }
        let system = SystemConfig::load(&system_path)?;
        let project = ProjectConfig::load(&project_path)?;
        Ok(Agent {
            project_id: project_id.to_owned(),
            agent_id: agent_id.to_owned(),
            paths,
            system,
            project,
        })
    }

    /// The project id.
    pub fn project_id(&self) -> &str {
        &self.project_id
    }

    /// The agent id.
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// The agent's paths.
    pub fn paths(&self) -> &AgentPaths {
        &self.paths
    }

    /// The agent's `system_config.yaml`.
    pub fn system_config(&self) -> &SystemConfig {
        &self.system
    }

    /// The project's `.project_config.toml`.
    pub fn project_config(&self) -> &ProjectConfig {
        &self.project
    }

    /// Resolves the session model: the inline entry, else the (provider, model_id) pair, else
    /// the project's default model.
    pub fn resolve_model(&self, opts: &SessionOptions) -> Result<ModelEntry, HarnessError> {
        if let Some(entry) = &opts.model {
            return Ok(entry.clone());
        }
        Ok(self
            .project
            .resolve(opts.provider.as_deref(), opts.model_id.as_deref())?)
    }

    fn workspace(&self, explicit: Option<&Path>) -> Result<PathBuf, HarnessError> {
        match explicit {
            Some(dir) => {
                let canon = dir
                    .canonicalize()
                    .map_err(|_| HarnessError::Workspace(dir.to_path_buf()))?;
                if canon.is_dir() {
                    Ok(canon)
                } else {
                    Err(HarnessError::Workspace(dir.to_path_buf()))
                }
            }
            None => {
                let dir = self
                    .paths
                    .workspaces()
                    .join(format!("tmp-{:08x}", rand::random::<u32>()));
                std::fs::create_dir_all(&dir).map_err(|e| HarnessError::io("create", &dir, e))?;
                dir.canonicalize()
                    .map_err(|e| HarnessError::io("resolve", &dir, e))
            }
        }
    }

    fn system_prompt(&self, session_id: &str, workspace: &Path, model: &ModelEntry) -> String {
        let agents_md = std::fs::read_to_string(self.paths.agents_md()).unwrap_or_default();
        let date = chrono::Local::now().format("%Y-%m-%d").to_string();
        let project_dir = self.paths.project_dir.display().to_string();
        let cwd = workspace.display().to_string();
        render_template(
            &self.system.system_prompt,
            &[
                ("AGENTS_MD", agents_md.trim()),
                ("SESSION_ID", session_id),
                ("CWD", &cwd),
                ("AGENT_ID", &self.agent_id),
                ("PROJECT_DIR", &project_dir),
                ("PROVIDER", &model.provider),
                ("MODEL_ID", &model.model_id),
                ("PLATFORM", std::env::consts::OS),
                ("SHELL", "bash"),
                ("DATE", &date),
            ],
        )
    }

    /// Creates a session: resolves model and workspace, writes nothing to the trace until the
    /// first run (which emits `session_meta`).
    pub fn create_session(&self, opts: SessionOptions) -> Result<Session, HarnessError> {
        let model = self.resolve_model(&opts)?;
        let workspace = self.workspace(opts.workspace_dir.as_deref())?;
        let session_id = new_session_id();
        let date = paths::session_date(&session_id)
            .unwrap_or("unknown-date")
            .to_owned();
        let trace_path = self.paths.trace_file(&date, &session_id, 1);
        let meta = SessionMeta {
            session_id: session_id.clone(),
            provider: model.provider.clone(),
            model_id: model.model_id.clone(),
            model_context_window: model
                .context_window
                .map_or(ContextWindow::Unknown, ContextWindow::Tokens),
            system_prompt: self.system_prompt(&session_id, &workspace, &model),
            agent_state: self.paths.agent_state().display().to_string(),
            workspace: workspace.display().to_string(),
            source: opts.source,
        };
        self.build_session(meta, trace_path, model, &opts, EngineState::default(), true)
    }

    fn build_session(
        &self,
        meta: SessionMeta,
        trace_path: PathBuf,
        model: ModelEntry,
        opts: &SessionOptions,
        state: EngineState,
        first_run_emits_meta: bool,
    ) -> Result<Session, HarnessError> {
        let workspace = PathBuf::from(&meta.workspace);
        let trace =
            TraceWriter::open(&trace_path).map_err(|e| HarnessError::io("open", &trace_path, e))?;
        let client = match opts.client.clone() {
            Some(c) => c,
            None => build_client(
                &model,
                ClientOptions {
                    idle_timeout: std::time::Duration::from_millis(self.system.model.timeout_ms),
                    http: None,
                },
            )?,
        };
        let thinking = opts
            .thinking_level
            .unwrap_or(self.system.model.thinking_level);
        let mut definitions = self.system.tool_definitions();
        if opts.depth >= MAX_SUBAGENT_DEPTH {
            definitions.retain(|d| !is_subagent_tool(&d.name));
        }
        let vault = crate::config::load_vault(&self.paths.vault())?;
        let services = ToolServices {
            commands: Arc::new(CommandSessionManager::with_vault(vault)),
            vision: self.vision_model(&model)?,
            ..ToolServices::default()
        }
        .with_subagents(Arc::new(SubagentManager::new(SpawnContext {
            agent: self.clone(),
            model: model.clone(),
            client: client.clone(),
            workspace: workspace.clone(),
            thinking,
            depth: opts.depth,
        })));
        let env = Arc::new(Environment::new(
            &workspace,
            definitions,
            model.vision,
            services,
        ));
        let settings = EngineSettings {
            system_prompt: meta.system_prompt.clone(),
            max_turns: self.system.max_turns,
            reconnect: self.system.reconnect.clone(),
            max_tokens: model.max_tokens.unwrap_or(self.system.model.max_tokens),
            context_window: model.context_window,
            default_thinking: Some(thinking),
        };
        let pending_meta =
            first_run_emits_meta.then(|| crate::protocol::session_meta(meta.clone()));
        let engine = Engine::new(
            client,
            env.clone(),
            Some(trace.clone()),
            settings,
            pending_meta,
            state,
        );
        Ok(Session::new(meta, trace_path, engine, env, trace))
    }

    /// The describer for `describe_image`: the project's `vision_model`, built only for a
    /// text-only session model. A configured reference that does not resolve is an error, so a
    /// typo does not silently disable image descriptions.
    fn vision_model(
        &self,
        session_model: &ModelEntry,
    ) -> Result<Option<VisionModel>, HarnessError> {
        let Some(r) = self
            .project
            .vision_model
            .as_ref()
            .filter(|_| !session_model.vision)
        else {
            return Ok(None);
        };
        let entry = self.project.resolve(Some(&r.provider), Some(&r.model_id))?;
        let client = build_client(
            &entry,
            ClientOptions {
                idle_timeout: std::time::Duration::from_millis(self.system.model.timeout_ms),
                http: None,
            },
        )?;
        Ok(Some(VisionModel {
            client,
            provider: entry.provider,
            model_id: entry.model_id,
        }))
    }

    /// The trace files of a session, lowest index first.
    pub fn trace_files(&self, session_id: &str) -> Result<Vec<PathBuf>, HarnessError> {
        validate_id("session id", session_id)?;
        let prefix = format!("{session_id}_");
        let mut found: Vec<(u32, PathBuf)> = Vec::new();
        for day in read_dir_sorted(&self.paths.traces())? {
            for file in read_dir_sorted(&day)? {
                let Some(name) = file.file_name().and_then(|n| n.to_str()) else {
                    continue;
                };
                let Some(index) = name
                    .strip_prefix(&prefix)
                    .and_then(|rest| rest.strip_suffix(".jsonl"))
                    .and_then(|n| n.parse::<u32>().ok())
                else {
                    continue;
                };
                found.push((index, file.clone()));
            }
        }
        found.sort();
        Ok(found.into_iter().map(|(_, p)| p).collect())
    }

    /// The most recently written session of this agent that a person started (subagent
    /// sessions are skipped); `None` when there is none.
    pub fn latest_session_id(&self) -> Result<Option<String>, HarnessError> {
        let mut best: Option<(std::time::SystemTime, String)> = None;
        for day in read_dir_sorted(&self.paths.traces())? {
            for file in read_dir_sorted(&day)? {
                let Some(name) = file.file_name().and_then(|n| n.to_str()) else {
                    continue;
                };
                let Some(stem) = name.strip_suffix(".jsonl") else {
                    continue;
                };
                let Some((id, _)) = stem.rsplit_once('_') else {
                    continue;
                };
                if !id.starts_with("session-")
                    || first_meta(&file).is_none_or(|m| m.source.is_some())
                {
                    continue;
                }
                let modified = std::fs::metadata(&file)
                    .and_then(|m| m.modified())
                    .unwrap_or(std::time::SystemTime::UNIX_EPOCH);
                if best
                    .as_ref()
                    .is_none_or(|(t, b)| (modified, id) > (*t, b.as_str()))
                {
                    best = Some((modified, id.to_owned()));
                }
            }
        }
        Ok(best.map(|(_, id)| id))
    }

    /// Reopens a session from its latest trace file: rebuilds the context, carry-over and
    /// counters by positional replay and keeps appending to the same file. The model is
    /// `opts.model`, else the configured `opts.provider`/`opts.model_id` pair, else the
    /// trace's (provider, model_id) from the project config (a session started with an inline
    /// model therefore needs `opts.model` again); tools and thinking follow the current
    /// configuration. `opts.workspace_dir` is ignored: a session keeps its workspace.
    pub fn resume_session(
        &self,
        session_id: &str,
        opts: SessionOptions,
    ) -> Result<Session, HarnessError> {
        let fail = |reason: String| HarnessError::Resume {
            session_id: session_id.to_owned(),
            reason,
        };
        let files = self.trace_files(session_id)?;
        let Some(path) = files.last().cloned() else {
            return Err(HarnessError::SessionNotFound(session_id.to_owned()));
        };
        let contents = crate::trace::read_trace_detailed(&path)?;
        let replayed = resume::replay(&contents.messages);
        let Some(meta) = replayed.meta else {
            return Err(fail(format!("{} has no session_meta line", path.display())));
        };
        if meta.provider.is_empty() {
            return Err(fail("its session_meta names no provider".into()));
        }
        if !Path::new(&meta.workspace).is_dir() {
            return Err(fail(format!(
                "its workspace {} no longer exists",
                meta.workspace
            )));
        }
        let model = match (&opts.model, &opts.provider, &opts.model_id) {
            (Some(m), _, _) => m.clone(),
            // The model was changed on purpose: resolve the new reference (both halves).
            (None, p, m) if p.is_some() || m.is_some() => {
                self.project.resolve(p.as_deref(), m.as_deref())?
            }
            _ => self
                .project
                .resolve(Some(&meta.provider), Some(&meta.model_id))
                .map_err(|e| fail(e.to_string()))?,
        };
        self.build_session(meta, path, model, &opts, replayed.state, false)
    }
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>, HarnessError> {
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            let mut v: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            v.sort();
            Ok(v)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Ok(Vec::new()),
        Err(e) => Err(HarnessError::io("list", dir, e)),
    }
}

/// The `session_meta` on the first line of a trace file, if it has one.
fn first_meta(path: &Path) -> Option<SessionMeta> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).ok()?;
    let mut line = String::new();
    std::io::BufReader::new(file).read_line(&mut line).ok()?;
    match serde_json::from_str::<OmniMessage>(&line).ok()?.body {
        crate::protocol::Body::SessionMeta(m) => Some(m),
        _ => None,
    }
}

struct SessionInner {
    meta: SessionMeta,
    trace_path: PathBuf,
    engine: Arc<tokio::sync::Mutex<Engine>>,
    env: Arc<Environment>,
    skip: ReconnectSkip,
    trace: TraceWriter,
    disposed: AtomicBool,
}

/// A conversation with one model in one workspace. Cheap to clone (shared).
#[derive(Clone)]
pub struct Session {
    inner: Arc<SessionInner>,
}

impl Session {
    fn new(
        meta: SessionMeta,
        trace_path: PathBuf,
        engine: Engine,
        env: Arc<Environment>,
        trace: TraceWriter,
    ) -> Self {
        let skip = engine.reconnect_skip();
        Session {
            inner: Arc::new(SessionInner {
                meta,
                trace_path,
                engine: Arc::new(tokio::sync::Mutex::new(engine)),
                env,
                skip,
                trace,
                disposed: AtomicBool::new(false),
            }),
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.inner.meta.session_id
    }

    /// The session's metadata (as its trace's first line).
    pub fn meta(&self) -> &SessionMeta {
        &self.inner.meta
    }

    /// The workspace.
    pub fn workspace(&self) -> &Path {
        self.inner.env.workspace_dir()
    }

    /// The trace file.
    pub fn trace_path(&self) -> &Path {
        &self.inner.trace_path
    }

    /// The tools offered to the model.
    pub fn tools(&self) -> Vec<ToolSpec> {
        self.inner.env.list_tools()
    }

    /// A tool's permission (`None` for unknown tools); approval modes key on it.
    pub fn tool_permission(&self, name: &str) -> Option<Permission> {
        self.inner.env.tool_permission(name)
    }

    /// The approver of `policy` in this session: permission rules (and the `read-only` mode)
    /// read this session's tool permissions.
    pub fn policy_approver(&self, policy: Policy) -> Arc<dyn Approver> {
        Arc::new(PolicyApprover::new(policy, self.inner.env.clone()))
    }

    /// Ends the current reconnect wait now; `false` when none is in progress.
    pub fn skip_reconnect_wait(&self) -> bool {
        self.inner.skip.skip()
    }

    /// Starts one task with `input` (new user messages) on the current tokio runtime. The
    /// task waits for a previous run of this session to finish first.
    pub fn run(
        &self,
        input: Vec<OmniMessage>,
        opts: RunOptions,
    ) -> Result<RunHandle, HarnessError> {
        if self.inner.disposed.load(Ordering::SeqCst) {
            return Err(HarnessError::Disposed(self.id().to_owned()));
        }
        check_run_input(&input)?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| HarnessError::NoRuntime(e.to_string()))?;
        let (tx, rx) = mpsc::channel(RUN_CHANNEL_CAPACITY);
        let cancel = CancellationToken::new();
        let engine = self.inner.engine.clone();
        let trace = self.inner.trace.clone();
        let task_cancel = cancel.clone();
        let task = runtime.spawn(async move {
            let mut engine = engine.lock_owned().await;
            engine.run(input, opts, task_cancel, tx.clone()).await;
            // Everything traced by this run is on disk before the stream ends.
            trace.flush().await;
            drop(tx);
        });
        Ok(RunHandle {
            rx,
            cancel,
            task: Some(task),
            session_id: self.id().to_owned(),
        })
    }

    /// A copy of the conversation state (context, carry-over, counters); waits for a running
    /// task to finish.
    pub async fn state(&self) -> EngineState {
        self.inner.engine.lock().await.state().clone()
    }

    /// Kills background work (command sessions, subagents), waits for the subagents to wind
    /// down and flushes the trace. Later runs fail with [`HarnessError::Disposed`].
    pub async fn dispose(&self) {
        self.inner.disposed.store(true, Ordering::SeqCst);
        self.inner.env.dispose();
        if let Some(subagents) = &self.inner.env.services().subagents {
            subagents.wait_children(SUBAGENT_KILL_WAIT).await;
        }
        self.inner.trace.flush().await;
    }
}

/// A run's input must be complete model messages from this session (no partials, events,
/// session metadata or origin-tagged messages): the engine writes it to the trace and sends it
/// to the model as is.
pub fn check_run_input(input: &[OmniMessage]) -> Result<(), HarnessError> {
    for (index, msg) in input.iter().enumerate() {
        let what = match &msg.body {
            crate::protocol::Body::SessionMeta(_) => Some("a session_meta".to_owned()),
            crate::protocol::Body::Event(_) => Some("an event_msg".to_owned()),
            crate::protocol::Body::Model(p) if p.is_partial() => {
                Some("a partial model message".to_owned())
            }
            crate::protocol::Body::Model(_) if msg.has_origin() => {
                Some("a message from a subagent (it has an origin)".to_owned())
            }
            crate::protocol::Body::Model(_) => None,
        };
        if let Some(what) = what {
            return Err(HarnessError::InvalidInput { index, what });
        }
    }
    Ok(())
}

/// What [`RunHandle::try_next`] found.
#[derive(Debug)]
pub enum TryNext {
    /// A message was ready.
    Message(Box<OmniMessage>),
    /// Nothing yet; the run goes on.
    Empty,
    /// The run has ended and every message was taken.
    Done,
}

/// The stream of one run. Dropping it aborts the run.
pub struct RunHandle {
    rx: mpsc::Receiver<OmniMessage>,
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
    session_id: String,
}

impl RunHandle {
    /// The next message; `None` once the run has ended.
    pub async fn next(&mut self) -> Option<OmniMessage> {
        self.rx.recv().await
    }

    /// The next message if one is ready, without waiting.
    pub fn try_next(&mut self) -> TryNext {
        match self.rx.try_recv() {
            Ok(m) => TryNext::Message(Box::new(m)),
            Err(mpsc::error::TryRecvError::Empty) => TryNext::Empty,
            Err(mpsc::error::TryRecvError::Disconnected) => TryNext::Done,
        }
    }

    /// Aborts the run (foreground commands are killed; an `abort` event ends the stream).
    pub fn abort(&self) {
        self.cancel.cancel();
    }

    /// The run's cancel token.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Waits for the run's task to end (call it once [`RunHandle::next`] returned `None`);
    /// a task that panicked is reported as [`HarnessError::RunFailed`].
    pub async fn finish(mut self) -> Result<(), HarnessError> {
        let Some(task) = self.task.take() else {
            return Ok(());
        };
        match task.await {
            Ok(()) => Ok(()),
            Err(e) => Err(HarnessError::RunFailed {
                session_id: std::mem::take(&mut self.session_id),
                message: if e.is_panic() {
                    crate::environment::panic_message(e.into_panic())
                } else {
                    "the run's task was cancelled".to_owned()
                },
            }),
        }
    }

    /// Collects every remaining message and waits for the run to end.
    pub async fn collect(mut self) -> Vec<OmniMessage> {
        let mut out = Vec::new();
        while let Some(m) = self.rx.recv().await {
            out.push(m);
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        out
    }
}

impl Drop for RunHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{
        EventType, StopReason, partial_text, request_begin, tool_call_output, user_image_url,
        user_text, with_origin,
    };

    #[test]
    fn run_input_takes_complete_model_messages_only() {
        let ok = vec![
            user_text("hi"),
            user_image_url("data:image/png;base64,AA=="),
            tool_call_output("out", "c1", StopReason::Completed, None),
        ];
        assert!(check_run_input(&ok).is_ok());
        let table = [
            (request_begin(), "an event_msg"),
            (
                partial_text(EventType::Delta, "x", StopReason::Completed),
                "a partial model message",
            ),
            (
                with_origin(user_text("x"), "child"),
                "a message from a subagent (it has an origin)",
            ),
        ];
        for (bad, what) in table {
            let err = check_run_input(&[user_text("a"), bad]).err();
            assert!(
                matches!(&err, Some(HarnessError::InvalidInput { index: 1, what: w }) if w == what),
                "{err:?}"
            );
        }
    }
}

//! The subagents of one parent session: how children are spawned, the registry of
//! backgrounded ones (ids, the cap, eviction) and their cleanup.
//!
//! A parent session owns one [`SubagentManager`] (through `ToolServices`), shared by its
//! `run_subagent` and `input_subagent` tools. Spawning resolves the child's agent and model
//! from the parent's [`SpawnContext`] and creates a full session in the same workspace. A child
//! is *tracked* from its spawn (so disposing the parent kills it even inside a foreground
//! window) and *registered* under a `subagent_id` only when it is still running at the end of
//! that window. The cap counts registered children and is checked before spawning: a finished
//! child is evicted to make room, a running one never.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::session::ChildSession;
use crate::config::{ModelEntry, validate_id};
use crate::error::HarnessError;
use crate::llm::{ModelClient, ThinkingLevel};
use crate::protocol::SessionSource;
use crate::session::{Agent, SessionOptions};

/// Deepest nesting of subagents: a top-level session (depth 0) may spawn children (depth 1),
/// which get no subagent tools and whose runner refuses to spawn (SPEC §3).
pub const MAX_SUBAGENT_DEPTH: u32 = 1;
/// Registered (backgrounded) children per parent session (SPEC §3): finished ones are evicted
/// to make room, running ones never.
pub const MAX_SUBAGENTS: usize = 8;
/// Characters of the child session id that make its `subagent_id` (its random suffix).
const ID_SUFFIX_CHARS: usize = 8;

/// What a parent session hands its children.
#[derive(Clone)]
pub struct SpawnContext {
    /// The parent's agent (children default to it).
    pub agent: Agent,
    /// The parent's resolved model.
    pub model: ModelEntry,
    /// The parent's model client, reused by children that inherit the model.
    pub client: Arc<dyn ModelClient>,
    /// The shared workspace (absolute).
    pub workspace: PathBuf,
    /// The parent's thinking level.
    pub thinking: ThinkingLevel,
    /// The parent's depth (0 = top-level session).
    pub depth: u32,
}

/// What `run_subagent` asks for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpawnRequest {
    /// Another agent of the same project; `None` = the parent's agent.
    pub agent_id: Option<String>,
    /// A (provider, model_id) pair; `None` = the parent's model.
    pub model: Option<(String, String)>,
}

/// Why a child could not be spawned; the message is what the model reads after
/// `[run_subagent error: `.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The parent is already at the maximum depth.
    #[error("subagent depth limit {0} reached; not spawning another subagent")]
    DepthLimit(u32),
    /// The agent id names no agent of this project.
    #[error("subagent error: agent \"{0}\" does not exist or is not accessible")]
    UnknownAgent(String),
    /// The parent session has been disposed.
    #[error("the parent session has been disposed")]
    Disposed,
    /// Creating the child session failed (e.g. an unknown model).
    #[error(transparent)]
    Session(#[from] HarnessError),
}

#[derive(Default)]
struct Registry {
    /// Backgrounded children in registration order (eviction takes the first finished one).
    registered: Vec<(String, Arc<ChildSession>)>,
    /// Every child spawned and not yet gone, registered or not (for `dispose`).
    tracked: Vec<Weak<ChildSession>>,
    disposed: bool,
}

/// One parent session's subagents; see the module docs.
pub struct SubagentManager {
    ctx: SpawnContext,
    registry: Mutex<Registry>,
}

impl SubagentManager {
    /// A manager spawning children from `ctx`.
    pub fn new(ctx: SpawnContext) -> Self {
        SubagentManager {
            ctx,
            registry: Mutex::new(Registry::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        // The registry holds plain data; a panic elsewhere never leaves it half-updated.
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The parent's depth.
    pub fn depth(&self) -> u32 {
        self.ctx.depth
    }

    /// Whether the parent session has been disposed.
    pub fn is_disposed(&self) -> bool {
        self.lock().disposed
    }

    /// Makes sure a new child may be registered: true when below the cap, or after evicting
    /// (killing) the first finished registered child; false when every registered child is
    /// still running (or the manager is disposed).
    pub fn make_room(&self) -> bool {
        let evicted = {
            let mut reg = self.lock();
            if reg.disposed {
                return false;
            }
            if reg.registered.len() < MAX_SUBAGENTS {
                return true;
            }
            match reg.registered.iter().position(|(_, c)| !c.running()) {
                Some(i) => reg.registered.remove(i).1,
                None => return false,
            }
        };
        evicted.kill();
        true
    }

    /// Creates a child session (blocking file-system work: call it off the async workers).
    /// Refuses at the depth limit and for agents that do not exist.
    pub fn spawn(&self, req: &SpawnRequest) -> Result<Arc<ChildSession>, SpawnError> {
        if self.ctx.depth >= MAX_SUBAGENT_DEPTH {
            return Err(SpawnError::DepthLimit(MAX_SUBAGENT_DEPTH));
        }
        if self.is_disposed() {
            return Err(SpawnError::Disposed);
        }
        let parent = &self.ctx.agent;
        let agent = match req.agent_id.as_deref() {
            None => parent.clone(),
            Some(id) if id == parent.agent_id() => parent.clone(),
            Some(id) => {
                let unknown = || SpawnError::UnknownAgent(id.to_owned());
                validate_id("agent id", id).map_err(|_| unknown())?;
                let dir = parent.paths().project_dir.join("agents").join(id);
                if !dir.is_dir() {
                    return Err(unknown());
                }
                Agent::open(Some(&parent.paths().root), parent.project_id(), id)?
            }
        };
        let mut opts = SessionOptions {
            workspace_dir: Some(self.ctx.workspace.clone()),
            thinking_level: Some(self.ctx.thinking),
            source: Some(SessionSource::Subagent),
            depth: self.ctx.depth + 1,
            ..SessionOptions::default()
        };
        match &req.model {
            Some((provider, model_id)) => {
                opts.provider = Some(provider.clone());
                opts.model_id = Some(model_id.clone());
            }
            None => {
                opts.model = Some(self.ctx.model.clone());
                opts.client = Some(self.ctx.client.clone());
            }
        }
        let child = ChildSession::new(agent.create_session(opts)?);
        let mut reg = self.lock();
        if reg.disposed {
            drop(reg);
            child.kill();
            return Err(SpawnError::Disposed);
        }
        reg.tracked.retain(|w| w.strong_count() > 0);
        reg.tracked.push(Arc::downgrade(&child));
        Ok(child)
    }

    /// Registers a child still running at the end of its first window and returns its id,
    /// `subagent-<last 8 chars of the child session id>`. Room was made before the spawn;
    /// parallel spawns may overshoot the cap briefly rather than drop a running child.
    pub fn register(&self, child: Arc<ChildSession>) -> String {
        self.make_room();
        let mut reg = self.lock();
        let sid = child.session_id();
        let tail: String = {
            let chars: Vec<char> = sid.chars().collect();
            chars[chars.len().saturating_sub(ID_SUFFIX_CHARS)..]
                .iter()
                .collect()
        };
        let mut id = format!("subagent-{tail}");
        while reg.registered.iter().any(|(other, _)| *other == id) {
            id = format!("subagent-{:08x}", rand::random::<u32>());
        }
        if reg.disposed {
            drop(reg);
            child.kill();
            return id;
        }
        reg.registered.push((id.clone(), child));
        id
    }

    /// The registered child with this id.
    pub fn get(&self, id: &str) -> Option<Arc<ChildSession>> {
        self.lock()
            .registered
            .iter()
            .find(|(other, _)| other == id)
            .map(|(_, c)| c.clone())
    }

    /// Registered children: `(subagent_id, running)`, in registration order.
    pub fn list(&self) -> Vec<(String, bool)> {
        self.lock()
            .registered
            .iter()
            .map(|(id, c)| (id.clone(), c.running()))
            .collect()
    }

    /// Kills every child (registered or inside a window) and refuses new ones. Returns at
    /// once; [`SubagentManager::wait_children`] waits for the children to wind down.
    /// Idempotent.
    pub fn dispose(&self) {
        let children: Vec<Arc<ChildSession>> = {
            let mut reg = self.lock();
            reg.disposed = true;
            let mut all: Vec<Arc<ChildSession>> =
                reg.registered.drain(..).map(|(_, c)| c).collect();
            all.extend(reg.tracked.iter().filter_map(Weak::upgrade));
            all
        };
        for child in children {
            child.kill();
        }
    }

    /// Waits (at most `limit` per child) until no child of this parent runs any more; after a
    /// [`SubagentManager::dispose`] this means their tasks ended and their traces are written.
    pub async fn wait_children(&self, limit: std::time::Duration) {
        let children: Vec<Arc<ChildSession>> = self
            .lock()
            .tracked
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for child in children {
            child.wait_idle(limit).await;
        }
    }
}

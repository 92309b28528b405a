//! The per-session registry of command sessions, shared by `exec_command` and `input_command`
//! through [`crate::tools::ToolServices`].
//!
//! `exec_command` asks the manager to [`spawn`](CommandSessionManager::spawn) a command (the
//! manager checks the working directory and builds the environment: host, then vault, then the
//! forced hardening variables). A command still running when its call yields is
//! [`register`](CommandSessionManager::register)ed under a `proc-<8 hex>` id, making room first
//! when [`MAX_SESSIONS`] are live: the first exited session goes, else the least recently used
//! running one is killed. `input_command` looks sessions up by id (which refreshes their LRU
//! time) and removes them once it has reported their exit. The manager also remembers every
//! session it spawned, registered or not, so [`dispose`](CommandSessionManager::dispose) and
//! dropping the manager leave no process behind.

use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::session::{CommandSession, SpawnError, SpawnSpec, lock};

/// Live registered sessions per manager (SPEC cap 64): a model that forgets its background
/// commands cannot pile up processes without bound.
pub const MAX_SESSIONS: usize = 64;

/// A registered session not used for this long is killed and removed when the next command is
/// registered (SPEC: 10-day idle reaping, a leak fallback; days-long sessions are legitimate).
pub const IDLE_TTL: Duration = Duration::from_secs(10 * 24 * 60 * 60);

/// Variables forced on every command after the host environment and the vault (SPEC), so no
/// command hangs on an editor, a pager, a credential prompt, or colours its output.
pub const FORCED_ENV: [(&str, &str); 6] = [
    ("GIT_EDITOR", "true"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("TERM", "dumb"),
    ("NO_COLOR", "1"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
];

/// Registration is refused once the manager was disposed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// The manager was disposed.
    #[error("command sessions have been disposed")]
    Disposed,
}

/// A registered session, as a host would list it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    /// The `proc-…` id.
    pub id: String,
    /// Pid of the shell (also its process group id).
    pub pid: i32,
    /// The command text.
    pub cmd: String,
    /// Whether it runs in a pseudo-terminal.
    pub tty: bool,
    /// Whether the shell is still running.
    pub running: bool,
}

struct Entry {
    id: String,
    session: Arc<CommandSession>,
    last_used: Instant,
}

#[derive(Default)]
struct Registry {
    /// Registered sessions in registration order.
    entries: Vec<Entry>,
    /// Every session spawned and not yet dropped, registered or not.
    spawned: Vec<Weak<CommandSession>>,
    /// Agent vault variables, applied over the host environment.
    vault: Vec<(String, String)>,
    disposed: bool,
}

/// Registry and lifecycle of command sessions; see the module docs.
#[derive(Default)]
pub struct CommandSessionManager {
    inner: Mutex<Registry>,
}

impl std::fmt::Debug for CommandSessionManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let reg = lock(&self.inner);
        f.debug_struct("CommandSessionManager")
            .field("registered", &reg.entries.len())
            .field("disposed", &reg.disposed)
            .finish_non_exhaustive()
    }
}

impl CommandSessionManager {
    /// An empty manager; commands get the host environment plus the forced variables.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty manager whose commands also get `vault` (agent vault variables, over the host
    /// environment, under the forced variables).
    pub fn with_vault<K: Into<String>, V: Into<String>>(
        vault: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let m = Self::new();
        m.set_vault(vault);
        m
    }

    /// Replaces the vault for commands started from now on.
    pub fn set_vault<K: Into<String>, V: Into<String>>(
        &self,
        vault: impl IntoIterator<Item = (K, V)>,
    ) {
        lock(&self.inner).vault = vault
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
    }

    /// Starts `bash -lc <cmd>` in `cwd` (unregistered: the caller kills it or registers it).
    pub fn spawn(
        &self,
        cmd: &str,
        cwd: &Path,
        tty: bool,
    ) -> Result<Arc<CommandSession>, SpawnError> {
        let mut env = {
            let reg = lock(&self.inner);
            if reg.disposed {
                return Err(SpawnError::Disposed);
            }
            reg.vault.clone()
        };
        env.extend(
            FORCED_ENV
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        match std::fs::metadata(cwd) {
            Err(_) => return Err(SpawnError::MissingWorkdir(cwd.to_path_buf())),
            Ok(meta) if !meta.is_dir() => return Err(SpawnError::NotADirectory(cwd.to_path_buf())),
            Ok(_) => {}
        }
        let session = Arc::new(CommandSession::spawn(&SpawnSpec {
            cmd,
            cwd,
            tty,
            env: &env,
        })?);
        let mut reg = lock(&self.inner);
        if reg.disposed {
            // Disposed while we were spawning: this command must not outlive the manager.
            session.kill();
            return Err(SpawnError::Disposed);
        }
        reg.spawned.retain(|w| w.strong_count() > 0);
        reg.spawned.push(Arc::downgrade(&session));
        Ok(session)
    }

    /// Registers a still-running session under a fresh `proc-<8 hex>` id, making room first
    /// (see the module docs).
    pub fn register(&self, session: Arc<CommandSession>) -> Result<String, RegisterError> {
        let mut reg = lock(&self.inner);
        if reg.disposed {
            return Err(RegisterError::Disposed);
        }
        let now = Instant::now();
        reg.entries.retain(|e| {
            let idle = now.saturating_duration_since(e.last_used) >= IDLE_TTL;
            if idle {
                e.session.kill();
            }
            !idle
        });
        while reg.entries.len() >= MAX_SESSIONS {
            let victim = reg
                .entries
                .iter()
                .position(|e| !e.session.is_running())
                .or_else(|| {
                    reg.entries
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, e)| e.last_used)
                        .map(|(i, _)| i)
                });
            let Some(i) = victim else { break };
            reg.entries.remove(i).session.kill();
        }
        let id = loop {
            let id = format!("proc-{:08x}", rand::random::<u32>());
            if !reg.entries.iter().any(|e| e.id == id) {
                break id;
            }
        };
        reg.entries.push(Entry {
            id: id.clone(),
            session,
            last_used: now,
        });
        Ok(id)
    }

    /// The session registered as `id`, refreshing its LRU time.
    pub fn get(&self, id: &str) -> Option<Arc<CommandSession>> {
        let mut reg = lock(&self.inner);
        let entry = reg.entries.iter_mut().find(|e| e.id == id)?;
        entry.last_used = Instant::now();
        Some(entry.session.clone())
    }

    /// Unregisters `id` and kills its group (reaping whatever it left running). Returns whether
    /// it was registered.
    pub fn remove(&self, id: &str) -> bool {
        let mut reg = lock(&self.inner);
        match reg.entries.iter().position(|e| e.id == id) {
            Some(i) => {
                reg.entries.remove(i).session.kill();
                true
            }
            None => false,
        }
    }

    /// The registered sessions, in registration order.
    pub fn list(&self) -> Vec<SessionInfo> {
        lock(&self.inner)
            .entries
            .iter()
            .map(|e| SessionInfo {
                id: e.id.clone(),
                pid: e.session.pid(),
                cmd: e.session.cmd().to_owned(),
                tty: e.session.tty(),
                running: e.session.is_running(),
            })
            .collect()
    }

    /// Number of registered sessions.
    pub fn len(&self) -> usize {
        lock(&self.inner).entries.len()
    }

    /// Whether no session is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether [`dispose`](Self::dispose) was called.
    pub fn is_disposed(&self) -> bool {
        lock(&self.inner).disposed
    }

    /// Kills every session this manager started (registered or still in a call: SIGTERM, then
    /// SIGKILL after the grace), forgets them, and refuses new commands. Idempotent.
    pub fn dispose(&self) {
        let (entries, spawned) = {
            let mut reg = lock(&self.inner);
            reg.disposed = true;
            (
                std::mem::take(&mut reg.entries),
                std::mem::take(&mut reg.spawned),
            )
        };
        for s in spawned.iter().filter_map(Weak::upgrade) {
            s.kill();
        }
        drop(entries);
    }
}

impl Drop for CommandSessionManager {
    fn drop(&mut self) {
        // Like an exit hook: nothing may outlive the manager, and there may be nobody left to
        // wait out a grace period, so every group gets SIGKILL now.
        let reg = lock(&self.inner);
        for s in reg.spawned.iter().filter_map(Weak::upgrade) {
            s.kill_now();
        }
    }
}

//! The data root layout (SPEC §4), in one place:
//!
//! ```text
//! <root>/<project>/.project_config.toml                    (0600)
//! <root>/<project>/agents/<agent>/agent_state/{system_config.yaml, AGENTS.md, .vault.toml}
//! <root>/<project>/agents/<agent>/traces/<yyyy-mm-dd>/<session_id>_<NNN>.jsonl
//! <root>/<project>/agents/<agent>/scratchpad/<session_id>/
//! <root>/<project>/agents/<agent>/workspaces/tmp-<8hex>/
//! ```
//!
//! The root is `$PENGUIN_HOME`, else `~/.penguin/data`.

use std::path::{Path, PathBuf};

/// Default project id.
pub const DEFAULT_PROJECT: &str = "default_project";
/// Default agent id.
pub const DEFAULT_AGENT: &str = "default_agent";

/// The data root: `$PENGUIN_HOME`, else `~/.penguin/data`.
pub fn default_root() -> PathBuf {
    if let Some(home) = std::env::var_os("PENGUIN_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".penguin").join("data")
}

/// File name of a project's configuration, in the project's folder.
const PROJECT_CONFIG_FILE: &str = ".project_config.toml";

/// `<root>/<project>/.project_config.toml`.
pub fn project_config_path(root: &Path, project: &str) -> PathBuf {
    root.join(project).join(PROJECT_CONFIG_FILE)
}

/// Paths of one agent of one project.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentPaths {
    /// The data root.
    pub root: PathBuf,
    /// `<root>/<project>`.
    pub project_dir: PathBuf,
    /// `<root>/<project>/agents/<agent>`.
    pub agent_dir: PathBuf,
}

impl AgentPaths {
    /// Paths for `project`/`agent` under `root`.
    pub fn new(root: &Path, project: &str, agent: &str) -> Self {
        let project_dir = root.join(project);
        let agent_dir = project_dir.join("agents").join(agent);
        AgentPaths {
            root: root.to_path_buf(),
            project_dir,
            agent_dir,
        }
    }

    /// `.project_config.toml`.
    pub fn project_config(&self) -> PathBuf {
        self.project_dir.join(PROJECT_CONFIG_FILE)
    }

    /// `agent_state/`.
    pub fn agent_state(&self) -> PathBuf {
        self.agent_dir.join("agent_state")
    }

    /// `agent_state/system_config.yaml`.
    pub fn system_config(&self) -> PathBuf {
        self.agent_state().join("system_config.yaml")
    }

    /// `agent_state/AGENTS.md`.
    pub fn agents_md(&self) -> PathBuf {
        self.agent_state().join("AGENTS.md")
    }

    /// `agent_state/.vault.toml`.
    pub fn vault(&self) -> PathBuf {
        self.agent_state().join(".vault.toml")
    }

    /// `traces/`.
    pub fn traces(&self) -> PathBuf {
        self.agent_dir.join("traces")
    }

    /// `traces/<date>/<session_id>_<NNN>.jsonl`.
    pub fn trace_file(&self, date: &str, session_id: &str, index: u32) -> PathBuf {
        self.traces()
            .join(date)
            .join(format!("{session_id}_{index:03}.jsonl"))
    }

    /// `scratchpad/<session_id>/`.
    pub fn scratchpad(&self, session_id: &str) -> PathBuf {
        self.agent_dir.join("scratchpad").join(session_id)
    }

    /// `workspaces/`.
    pub fn workspaces(&self) -> PathBuf {
        self.agent_dir.join("workspaces")
    }
}

/// A new session id: `session-YYYY-MM-DD-HH-mm-ss-<8hex>` in local time.
pub fn new_session_id() -> String {
    format!(
        "session-{}-{:08x}",
        chrono::Local::now().format("%Y-%m-%d-%H-%M-%S"),
        rand::random::<u32>()
    )
}

/// The local date of a session id (`YYYY-MM-DD`), which names its trace folder.
pub fn session_date(session_id: &str) -> Option<&str> {
    let rest = session_id.strip_prefix("session-")?;
    rest.get(..10)
        .filter(|d| d.len() == 10 && d.as_bytes()[4] == b'-' && d.as_bytes()[7] == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_ids() {
        let p = AgentPaths::new(Path::new("/data"), "proj", "agent");
        assert_eq!(
            p.project_config(),
            Path::new("/data/proj/.project_config.toml")
        );
        assert_eq!(
            p.system_config(),
            Path::new("/data/proj/agents/agent/agent_state/system_config.yaml")
        );
        assert_eq!(
            p.trace_file("2026-11-29", "session-x", 1),
            Path::new("/data/proj/agents/agent/traces/2026-11-29/session-x_001.jsonl")
        );
        let id = new_session_id();
        assert_eq!(
            id.len(),
            "session-2026-11-29-13-36-10-0a1b2c3d".len(),
            "{id}"
        );
        assert!(crate::config::validate_id("session id", &id).is_ok());
        assert_eq!(session_date(&id).map(str::len), Some(10));
        assert_eq!(
            session_date("session-2026-11-29-13-36-10-0a1b2c3d"),
            Some("2026-11-29")
        );
        assert_eq!(session_date("nope"), None);
    }
}

//! `Model`, `Agent` and `Session`: thin wrappers that convert arguments and delegate to the
//! core's `Agent` and `Session`.

use std::path::PathBuf;
use std::sync::Arc;

use penguin_harness_core::config::{ClientType, ModelEntry};
use penguin_harness_core::{Agent, Session, SessionOptions};
use pyo3::prelude::*;

use crate::approve::policy_from_py;
use crate::convert::{input_from_py, thinking_from_py, value_to_py};
use crate::errors::BindingError;
use crate::run::PyRun;
use crate::runtime;

/// An inline model definition: a session needs no config file when given one.
#[pyclass(frozen, eq, module = "penguin_harness", name = "Model")]
#[derive(PartialEq)]
pub struct PyModel {
    entry: ModelEntry,
}

impl PyModel {
    /// The core entry.
    pub fn entry(&self) -> &ModelEntry {
        &self.entry
    }
}

#[pymethods]
impl PyModel {
    #[new]
    #[pyo3(signature = (
        provider,
        model_id,
        base_url = None,
        api_key = None,
        client_type = "openai-chat",
        vision = true,
        context_window = None,
        max_tokens = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        provider: String,
        model_id: String,
        base_url: Option<String>,
        api_key: Option<String>,
        client_type: &str,
        vision: bool,
        context_window: Option<u64>,
        max_tokens: Option<i64>,
    ) -> Result<Self, BindingError> {
        let client_type: ClientType = client_type.parse()?;
        let mut entry = ModelEntry::new(provider, model_id);
        entry.base_url = base_url;
        entry.api_key = api_key;
        entry.client_type = client_type;
        entry.vision = vision;
        entry.context_window = context_window;
        entry.max_tokens = max_tokens;
        Ok(PyModel { entry })
    }

    #[getter]
    fn provider(&self) -> &str {
        &self.entry.provider
    }

    #[getter]
    fn model_id(&self) -> &str {
        &self.entry.model_id
    }

    #[getter]
    fn base_url(&self) -> Option<&str> {
        self.entry.base_url.as_deref()
    }

    #[getter]
    fn api_key(&self) -> Option<&str> {
        self.entry.api_key.as_deref()
    }

    #[getter]
    fn client_type(&self) -> &'static str {
        self.entry.client_type.as_str()
    }

    #[getter]
    fn vision(&self) -> bool {
        self.entry.vision
    }

    #[getter]
    fn context_window(&self) -> Option<u64> {
        self.entry.context_window
    }

    #[getter]
    fn max_tokens(&self) -> Option<i64> {
        self.entry.max_tokens
    }

    fn __repr__(&self) -> String {
        let e = &self.entry;
        let opt = |v: Option<String>| v.unwrap_or_else(|| "None".into());
        format!(
            "Model(provider={:?}, model_id={:?}, base_url={}, api_key={}, client_type={:?}, vision={}, context_window={}, max_tokens={})",
            e.provider,
            e.model_id,
            opt(e.base_url.as_ref().map(|u| format!("{u:?}"))),
            if e.api_key.is_some() { "'***'" } else { "None" },
            e.client_type.as_str(),
            if e.vision { "True" } else { "False" },
            opt(e.context_window.map(|n| n.to_string())),
            opt(e.max_tokens.map(|n| n.to_string())),
        )
    }
}

/// One agent of one project (a folder under the data root).
#[pyclass(frozen, module = "penguin_harness", name = "Agent")]
pub struct PyAgent {
    agent: Agent,
}

/// Opens an agent, creating its folders and default configuration when absent.
#[pyfunction]
// The literals are the core's DEFAULT_AGENT / DEFAULT_PROJECT, spelled out so Python
// introspection (and stubtest) shows the real defaults.
#[pyo3(signature = (agent_id = "default_agent", *, project_id = "default_project", root = None))]
pub fn create_agent(
    agent_id: &str,
    project_id: &str,
    root: Option<PathBuf>,
) -> Result<PyAgent, BindingError> {
    Ok(PyAgent {
        agent: Agent::open(root.as_deref(), project_id, agent_id)?,
    })
}

#[pymethods]
impl PyAgent {
    #[getter]
    fn agent_id(&self) -> &str {
        self.agent.agent_id()
    }

    #[getter]
    fn project_id(&self) -> &str {
        self.agent.project_id()
    }

    #[getter]
    fn root(&self) -> PathBuf {
        self.agent.paths().root.clone()
    }

    #[getter]
    fn agent_dir(&self) -> PathBuf {
        self.agent.paths().agent_dir.clone()
    }

    #[getter]
    fn traces_dir(&self) -> PathBuf {
        self.agent.paths().traces()
    }

    #[pyo3(signature = (
        *,
        workspace_dir = None,
        model = None,
        provider = None,
        model_id = None,
        thinking_level = None,
    ))]
    fn create_session(
        &self,
        workspace_dir: Option<PathBuf>,
        model: Option<PyRef<'_, PyModel>>,
        provider: Option<String>,
        model_id: Option<String>,
        thinking_level: Option<&str>,
    ) -> Result<PySession, BindingError> {
        let opts = SessionOptions {
            workspace_dir,
            model: model.map(|m| m.entry.clone()),
            provider,
            model_id,
            thinking_level: thinking_from_py(thinking_level)?,
            ..SessionOptions::default()
        };
        // Building the Environment may start background tasks: do it inside the runtime.
        let rt = runtime::handle()?;
        let session = {
            let _in_runtime = rt.enter();
            Arc::new(self.agent.create_session(opts)?)
        };
        runtime::register_session(&session);
        Ok(PySession { session })
    }

    #[pyo3(signature = (
        session_id,
        *,
        model = None,
        provider = None,
        model_id = None,
        thinking_level = None,
    ))]
    fn resume_session(
        &self,
        session_id: &str,
        model: Option<PyRef<'_, PyModel>>,
        provider: Option<String>,
        model_id: Option<String>,
        thinking_level: Option<&str>,
    ) -> Result<PySession, BindingError> {
        let opts = SessionOptions {
            model: model.map(|m| m.entry.clone()),
            provider,
            model_id,
            thinking_level: thinking_from_py(thinking_level)?,
            ..SessionOptions::default()
        };
        let rt = runtime::handle()?;
        let session = {
            let _in_runtime = rt.enter();
            Arc::new(self.agent.resume_session(session_id, opts)?)
        };
        runtime::register_session(&session);
        Ok(PySession { session })
    }

    fn latest_session_id(&self) -> Result<Option<String>, BindingError> {
        Ok(self.agent.latest_session_id()?)
    }

    fn __repr__(&self) -> String {
        format!(
            "Agent(agent_id={:?}, project_id={:?}, root={:?})",
            self.agent.agent_id(),
            self.agent.project_id(),
            self.agent.paths().root
        )
    }
}

/// A conversation with one model in one workspace.
#[pyclass(frozen, module = "penguin_harness", name = "Session")]
pub struct PySession {
    session: Arc<Session>,
}

#[pymethods]
impl PySession {
    #[getter]
    fn id(&self) -> &str {
        self.session.id()
    }

    #[getter]
    fn trace_path(&self) -> PathBuf {
        self.session.trace_path().to_path_buf()
    }

    #[getter]
    fn workspace(&self) -> PathBuf {
        self.session.workspace().to_path_buf()
    }

    #[getter]
    fn meta<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        value_to_py(py, self.session.meta())
    }

    fn tools<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        value_to_py(py, &self.session.tools())
    }

    fn tool_permission(&self, name: &str) -> Option<&'static str> {
        self.session.tool_permission(name).map(|p| p.as_str())
    }

    fn skip_reconnect_wait(&self) -> bool {
        self.session.skip_reconnect_wait()
    }

    #[pyo3(signature = (messages, *, approve = None, thinking_level = None))]
    fn run(
        &self,
        messages: &Bound<'_, PyAny>,
        approve: Option<&Bound<'_, PyAny>>,
        thinking_level: Option<&str>,
    ) -> Result<PyRun, BindingError> {
        let input = input_from_py(messages)?;
        // Refuse bad input now rather than at the first iteration.
        penguin_harness_core::session::check_run_input(&input)?;
        let policy = approve.map(policy_from_py).transpose()?;
        let thinking = thinking_from_py(thinking_level)?;
        Ok(PyRun::new(self.session.clone(), input, policy, thinking))
    }

    fn dispose(&self, py: Python<'_>) -> Result<(), BindingError> {
        let session = self.session.clone();
        match runtime::wait(py, async move { session.dispose().await }) {
            // The exit hook already disposed every session.
            Err(BindingError::RuntimeClosed(_)) => Ok(()),
            other => other,
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: &Bound<'_, PyAny>,
        _exc: &Bound<'_, PyAny>,
        _tb: &Bound<'_, PyAny>,
    ) -> Result<(), BindingError> {
        self.dispose(py)
    }

    fn __repr__(&self) -> String {
        format!(
            "Session(id={:?}, workspace={:?})",
            self.session.id(),
            self.session.workspace()
        )
    }
}

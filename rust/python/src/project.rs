//! `Project`: a project's model configuration (`.project_config.toml`), delegating to the
//! core's `ProjectFile`. Listing returns plain dicts without keys.

use std::path::PathBuf;

use penguin_harness_core::config::ProjectFile;
use pyo3::prelude::*;

use crate::agent::PyModel;
use crate::convert::value_to_py;
use crate::errors::BindingError;

/// The model configuration of one project.
#[pyclass(frozen, module = "penguin_harness", name = "Project")]
pub struct PyProject {
    project_id: String,
    file: ProjectFile,
}

/// Opens a project's configuration; nothing is written until the first change.
#[pyfunction]
// The literal is the core's DEFAULT_PROJECT (see `create_agent`).
#[pyo3(signature = (project_id = "default_project", *, root = None))]
pub fn open_project(project_id: &str, root: Option<PathBuf>) -> Result<PyProject, BindingError> {
    Ok(PyProject {
        project_id: project_id.to_owned(),
        file: penguin_harness_core::session::project_file(root.as_deref(), project_id)?,
    })
}

#[pymethods]
impl PyProject {
    #[getter]
    fn project_id(&self) -> &str {
        &self.project_id
    }

    #[getter]
    fn config_path(&self) -> PathBuf {
        self.file.path().to_path_buf()
    }

    fn models<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyAny>, BindingError> {
        let models = self.file.models()?;
        Ok(value_to_py(py, &models)?)
    }

    #[pyo3(signature = (model, *, set_default = false))]
    fn add_model(
        &self,
        model: PyRef<'_, PyModel>,
        set_default: bool,
    ) -> Result<bool, BindingError> {
        Ok(self.file.add_model(model.entry().clone(), set_default)?)
    }

    fn remove_model(&self, provider: &str, model_id: &str) -> Result<(), BindingError> {
        Ok(self.file.remove_model(provider, model_id)?)
    }

    fn set_vision_model(&self, provider: &str, model_id: &str) -> Result<(), BindingError> {
        Ok(self.file.set_vision_model(provider, model_id)?)
    }

    fn __repr__(&self) -> String {
        format!(
            "Project(project_id={:?}, config_path={:?})",
            self.project_id,
            self.file.path()
        )
    }
}

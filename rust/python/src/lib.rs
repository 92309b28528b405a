//! Python bindings (`penguin_harness._core`): conversions and delegation only.
//!
//! Users import `penguin_harness`, which re-exports what is public here. Modules:
//! [`runtime`] (the extension's tokio runtime, its exit hook, the detach-and-wait helper),
//! [`errors`] (the exception hierarchy, mapped in one place), [`convert`] (dicts ⇄ core
//! messages), [`agent`] (`Model`, `Agent`, `Session`), [`project`] (`Project`, the model
//! configuration), [`run`] (`Run`, the async iterator) and
//! [`approve`] (Python callables as approvers, `Policy`).

mod agent;
mod approve;
mod convert;
mod errors;
mod project;
mod run;
mod runtime;

use std::path::PathBuf;
use std::sync::Mutex;

use penguin_harness_core::protocol::{self, OmniMessage};
use pyo3::prelude::*;

use crate::errors::BindingError;

/// Iterator over a trace file's messages (dicts), in file order.
#[pyclass(frozen, module = "penguin_harness", name = "TraceReader")]
struct TraceReader {
    messages: Mutex<std::vec::IntoIter<OmniMessage>>,
}

#[pymethods]
impl TraceReader {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let next = self.messages.lock().ok().and_then(|mut m| m.next());
        next.map(|m| convert::message_to_py(py, &m)).transpose()
    }
}

/// Reads a trace file (JSONL): a torn last line is ignored, malformed middle lines skipped.
#[pyfunction]
fn read_trace(path: PathBuf) -> Result<TraceReader, BindingError> {
    let messages = penguin_harness_core::trace::read_trace(&path)?;
    Ok(TraceReader {
        messages: Mutex::new(messages.into_iter()),
    })
}

/// A user text message.
#[pyfunction]
fn user_text(py: Python<'_>, text: &str) -> PyResult<Py<PyAny>> {
    Ok(convert::message_to_py(py, &protocol::user_text(text))?.unbind())
}

/// A user image given by URL (`https://…` or a `data:` URL).
#[pyfunction]
fn user_image(py: Python<'_>, url: &str) -> PyResult<Py<PyAny>> {
    Ok(convert::message_to_py(py, &protocol::user_image_url(url))?.unbind())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", penguin_harness_core::VERSION)?;
    errors::register(m)?;
    m.add_class::<agent::PyModel>()?;
    m.add_class::<agent::PyAgent>()?;
    m.add_class::<agent::PySession>()?;
    m.add_class::<run::PyRun>()?;
    m.add_class::<approve::PyPolicy>()?;
    m.add_class::<TraceReader>()?;
    m.add_class::<project::PyProject>()?;
    m.add_function(wrap_pyfunction!(agent::create_agent, m)?)?;
    m.add_function(wrap_pyfunction!(project::open_project, m)?)?;
    m.add_function(wrap_pyfunction!(read_trace, m)?)?;
    m.add_function(wrap_pyfunction!(user_text, m)?)?;
    m.add_function(wrap_pyfunction!(user_image, m)?)?;
    let shutdown = wrap_pyfunction!(runtime::shutdown, m)?;
    m.add_function(shutdown.clone())?;
    m.py()
        .import("atexit")?
        .call_method1("register", (shutdown,))?;
    Ok(())
}

//! Conversions between Python values and core types.
//!
//! Messages cross as dicts built by serde (`pythonize`), so a dict has exactly the keys, key
//! order and values of the message's trace line, and a dict read back goes through the same
//! deserializer as a trace line.

use std::str::FromStr;

use penguin_harness_core::llm::ThinkingLevel;
use penguin_harness_core::protocol::{self, OmniMessage};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::errors::BindingError;

/// A message as a dict in trace-line order.
pub fn message_to_py<'py>(py: Python<'py>, msg: &OmniMessage) -> PyResult<Bound<'py, PyAny>> {
    pythonize::pythonize(py, msg).map_err(PyErr::from)
}

/// Any serializable core value (tool specs, metadata) as plain Python data.
pub fn value_to_py<'py, T: serde::Serialize>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    pythonize::pythonize(py, value).map_err(PyErr::from)
}

/// One message dict.
pub fn message_from_py(obj: &Bound<'_, PyAny>) -> Result<OmniMessage, BindingError> {
    if !obj.is_instance_of::<PyDict>() {
        return Err(BindingError::Message(format!(
            "expected an OmniMessage dict, got {}",
            type_name(obj)
        )));
    }
    pythonize::depythonize::<OmniMessage>(obj)
        .map_err(|e| BindingError::Message(format!("not a valid OmniMessage: {e}")))
}

/// Run input: a string (one user text), one message dict, or an iterable of message dicts.
pub fn input_from_py(obj: &Bound<'_, PyAny>) -> Result<Vec<OmniMessage>, BindingError> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(vec![protocol::user_text(s.to_cow()?)]);
    }
    if obj.is_instance_of::<PyDict>() {
        return Ok(vec![message_from_py(obj)?]);
    }
    let iter = obj.try_iter().map_err(|_| {
        BindingError::Message(format!(
            "run input must be a string, a message dict or a list of message dicts, got {}",
            type_name(obj)
        ))
    })?;
    let mut out = Vec::new();
    for (i, item) in iter.enumerate() {
        let item = item?;
        out.push(message_from_py(&item).map_err(|e| match e {
            BindingError::Message(m) => BindingError::Message(format!("message {i}: {m}")),
            other => other,
        })?);
    }
    Ok(out)
}

/// An optional thinking level name.
pub fn thinking_from_py(level: Option<&str>) -> Result<Option<ThinkingLevel>, BindingError> {
    level
        .map(|l| ThinkingLevel::from_str(l).map_err(BindingError::Argument))
        .transpose()
}

/// `type(obj).__name__`, for error messages.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an unknown type".into())
}

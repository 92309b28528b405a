//! The exception hierarchy and the one place Rust errors become Python exceptions.
//!
//! Every exception the package raises derives from `penguin_harness.HarnessError`; each core
//! error kind has its own subclass so callers can catch precisely. Methods return
//! `Result<_, BindingError>`, and `From<BindingError> for PyErr` below is the only mapping.

use penguin_harness_core::HarnessError as CoreError;
use penguin_harness_core::approval::PolicyError as CorePolicyError;
use penguin_harness_core::config::ConfigError as CoreConfigError;
use penguin_harness_core::trace::TraceError as CoreTraceError;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    penguin_harness,
    HarnessError,
    PyException,
    "Root of every exception penguin_harness raises."
);
create_exception!(
    penguin_harness,
    ConfigError,
    HarnessError,
    "A configuration file or value is missing, unreadable or invalid."
);
create_exception!(
    penguin_harness,
    StorageError,
    HarnessError,
    "A file-system operation on the data root failed."
);
create_exception!(
    penguin_harness,
    WorkspaceError,
    HarnessError,
    "An explicit workspace does not exist or is not a directory."
);
create_exception!(
    penguin_harness,
    ModelError,
    HarnessError,
    "The model client could not be built (bad base URL, bad key)."
);
create_exception!(
    penguin_harness,
    TraceError,
    HarnessError,
    "A trace file could not be read."
);
create_exception!(
    penguin_harness,
    SessionNotFoundError,
    HarnessError,
    "A session id that has no trace."
);
create_exception!(
    penguin_harness,
    ResumeError,
    HarnessError,
    "A trace that cannot be resumed."
);
create_exception!(
    penguin_harness,
    SessionDisposedError,
    HarnessError,
    "The session was disposed."
);
create_exception!(
    penguin_harness,
    MessageError,
    HarnessError,
    "A message is not a valid OmniMessage, or not valid run input."
);
create_exception!(
    penguin_harness,
    PolicyError,
    HarnessError,
    "An approval policy could not be built (bad pattern, unknown mode)."
);
create_exception!(
    penguin_harness,
    InvalidArgumentError,
    HarnessError,
    "An argument has a value the harness does not accept."
);
create_exception!(
    penguin_harness,
    UsageError,
    HarnessError,
    "An API used out of order or outside an event loop."
);
create_exception!(
    penguin_harness,
    RuntimeClosedError,
    HarnessError,
    "The harness runtime has shut down (the interpreter is exiting)."
);

/// Everything a binding method can fail with.
#[derive(Debug, thiserror::Error)]
pub enum BindingError {
    /// An error of the core's session layer.
    #[error(transparent)]
    Core(#[from] CoreError),
    /// A configuration error outside session creation (e.g. a client type name).
    #[error(transparent)]
    Config(#[from] CoreConfigError),
    /// A trace could not be read.
    #[error(transparent)]
    Trace(#[from] CoreTraceError),
    /// A policy could not be built.
    #[error(transparent)]
    Policy(#[from] CorePolicyError),
    /// A message dict does not convert.
    #[error("{0}")]
    Message(String),
    /// A bad argument value.
    #[error("{0}")]
    Argument(String),
    /// API misuse.
    #[error("{0}")]
    Usage(String),
    /// The runtime is gone.
    #[error("harness runtime unavailable: {0}")]
    RuntimeClosed(String),
    /// A Python exception to pass through unchanged (raised by Python code we called).
    #[error("{0}")]
    Python(PyErr),
}

impl From<PyErr> for BindingError {
    fn from(e: PyErr) -> Self {
        BindingError::Python(e)
    }
}

impl From<BindingError> for PyErr {
    fn from(e: BindingError) -> PyErr {
        let text = e.to_string();
        match e {
            BindingError::Core(core) => match core {
                CoreError::Config(_) => ConfigError::new_err(text),
                CoreError::Io { .. } => StorageError::new_err(text),
                CoreError::Workspace(_) => WorkspaceError::new_err(text),
                CoreError::Model(_) => ModelError::new_err(text),
                CoreError::Trace(_) => TraceError::new_err(text),
                CoreError::SessionNotFound(_) => SessionNotFoundError::new_err(text),
                CoreError::Resume { .. } => ResumeError::new_err(text),
                CoreError::Disposed(_) => SessionDisposedError::new_err(text),
                CoreError::InvalidInput { .. } => MessageError::new_err(text),
                CoreError::NoRuntime(_) => RuntimeClosedError::new_err(text),
                CoreError::RunFailed { .. } => HarnessError::new_err(text),
            },
            BindingError::Config(_) => ConfigError::new_err(text),
            BindingError::Trace(_) => TraceError::new_err(text),
            BindingError::Policy(_) => PolicyError::new_err(text),
            BindingError::Message(_) => MessageError::new_err(text),
            BindingError::Argument(_) => InvalidArgumentError::new_err(text),
            BindingError::Usage(_) => UsageError::new_err(text),
            BindingError::RuntimeClosed(_) => RuntimeClosedError::new_err(text),
            BindingError::Python(err) => err,
        }
    }
}

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("HarnessError", py.get_type::<HarnessError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("StorageError", py.get_type::<StorageError>())?;
    m.add("WorkspaceError", py.get_type::<WorkspaceError>())?;
    m.add("ModelError", py.get_type::<ModelError>())?;
    m.add("TraceError", py.get_type::<TraceError>())?;
    m.add(
        "SessionNotFoundError",
        py.get_type::<SessionNotFoundError>(),
    )?;
    m.add("ResumeError", py.get_type::<ResumeError>())?;
    m.add(
        "SessionDisposedError",
        py.get_type::<SessionDisposedError>(),
    )?;
    m.add("MessageError", py.get_type::<MessageError>())?;
    m.add("PolicyError", py.get_type::<PolicyError>())?;
    m.add(
        "InvalidArgumentError",
        py.get_type::<InvalidArgumentError>(),
    )?;
    m.add("UsageError", py.get_type::<UsageError>())?;
    m.add("RuntimeClosedError", py.get_type::<RuntimeClosedError>())?;
    Ok(())
}

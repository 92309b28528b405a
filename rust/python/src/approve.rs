//! Approval from Python: callables bridged to the core's `Approver`, and `Policy`, the Python
//! face of the core's approval policies.
//!
//! Data flow of one decision: the engine calls [`PyApprover::approve`] on a tokio task. It
//! schedules an [`ApprovalJob`] on the consumer's event loop with `call_soon_threadsafe` (from
//! the blocking pool, see `runtime::with_python`) and waits on a oneshot channel. On the loop
//! thread the job converts the `tool_call` to a dict and calls the callable; a plain result is
//! converted at once, an awaitable becomes an asyncio task whose done-callback
//! ([`ApprovalDone`]) converts its result. Sync and async callables thus both run on the loop
//! thread, inside the context captured when the run started (contextvars, Jupyter widgets and
//! `input()` work). If the engine drops the wait (the run was aborted), [`PendingGuard`]
//! cancels the asyncio task, or stops a job that has not run yet.
//!
//! Results: `"allow"`, `"deny"`, `"forbidden"`, `True` (allow) and `False` (deny). Anything
//! else, and any exception, is an `ApprovalError` naming the value or the exception, which the
//! engine turns into a deny with that reason on the `approval_decision` event.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use penguin_harness_core::approval::{
    ApprovalError, ApprovalMode, Approver, MatchKind, Matcher, Policy, policy::parse_permission,
};
use penguin_harness_core::protocol::{Decision, OmniMessage};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyString};
use tokio::sync::oneshot;

use crate::convert::{message_to_py, type_name};
use crate::errors::BindingError;
use crate::runtime::{with_python, with_python_detached};

/// A policy whose ask leaves are still Python callables (bound to a loop when a run starts).
pub type PolicySpec = Policy<Arc<Py<PyAny>>>;

type Answer = Result<Decision, ApprovalError>;
type AnswerTx = Mutex<Option<oneshot::Sender<Answer>>>;

/// The event loop (and context) approval callbacks of one run execute in.
#[derive(Clone)]
pub struct LoopCtx {
    /// The consumer's running loop.
    pub event_loop: Arc<Py<PyAny>>,
    /// `contextvars.copy_context()` taken when the run started.
    pub context: Arc<Py<PyAny>>,
}

/// A Python callable as a core approver.
pub struct PyApprover {
    callable: Arc<Py<PyAny>>,
    lp: LoopCtx,
}

impl PyApprover {
    /// Binds `callable` to the run's loop.
    pub fn new(callable: Arc<Py<PyAny>>, lp: LoopCtx) -> Self {
        PyApprover { callable, lp }
    }
}

/// State shared by the waiting Rust side and the loop-thread objects of one decision.
#[derive(Default)]
struct Pending {
    /// The Rust side stopped waiting: do not start the callable.
    cancelled: bool,
    /// The asyncio task of an async callable, once started.
    task: Option<Py<PyAny>>,
}

type Shared = Arc<Mutex<Pending>>;

#[async_trait]
impl Approver for PyApprover {
    async fn approve(&self, tool_call: &OmniMessage) -> Answer {
        let (tx, rx) = oneshot::channel();
        let shared: Shared = Arc::default();
        let job = ApprovalJob {
            callable: self.callable.clone(),
            msg: tool_call.clone(),
            shared: shared.clone(),
            tx: Mutex::new(Some(tx)),
        };
        // Armed before scheduling: the engine may drop this future at any await point, even
        // after the job already ran on the loop but before this task was polled again.
        let mut guard = PendingGuard {
            shared,
            lp: self.lp.clone(),
            armed: true,
        };
        let lp = self.lp.clone();
        let scheduled = with_python(move |py| schedule(py, &lp, job)).await;
        if scheduled != Some(true) {
            guard.armed = false;
            return Err(ApprovalError::new(
                "the event loop that runs approval callbacks is closed",
            ));
        }
        let answer = rx.await;
        guard.armed = false;
        answer.unwrap_or_else(|_| {
            Err(ApprovalError::new(
                "the approval callback was dropped before it answered (event loop closed?)",
            ))
        })
    }
}

/// `loop.call_soon_threadsafe(obj, context=ctx)`; false when the loop refuses (closed).
pub fn call_soon_threadsafe<T>(
    py: Python<'_>,
    event_loop: &Py<PyAny>,
    obj: T,
    context: Option<&Py<PyAny>>,
) -> bool
where
    T: pyo3::PyClass + Into<pyo3::PyClassInitializer<T>>,
{
    let call = || -> PyResult<()> {
        let obj = Py::new(py, obj)?;
        let kwargs = PyDict::new(py);
        if let Some(ctx) = context {
            kwargs.set_item("context", ctx.bind(py))?;
        }
        event_loop.bind(py).call_method(
            intern!(py, "call_soon_threadsafe"),
            (obj,),
            Some(&kwargs),
        )?;
        Ok(())
    };
    call().is_ok()
}

fn schedule<T>(py: Python<'_>, lp: &LoopCtx, obj: T) -> bool
where
    T: pyo3::PyClass + Into<pyo3::PyClassInitializer<T>>,
{
    call_soon_threadsafe(py, &lp.event_loop, obj, Some(&lp.context))
}

/// Cancels the decision's Python side when the engine stops waiting for it: sets the
/// `cancelled` flag (a job that has not run yet then does nothing) and schedules
/// [`CancelApproval`] on the loop, which cancels the task a job already started. Both run on the
/// loop thread, so one of the two always sees the other's effect.
struct PendingGuard {
    shared: Shared,
    lp: LoopCtx,
    armed: bool,
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Ok(mut p) = self.shared.lock() {
            p.cancelled = true;
        }
        let cancel = CancelApproval {
            shared: self.shared.clone(),
        };
        let lp = self.lp.clone();
        with_python_detached(move |py| {
            schedule(py, &lp, cancel);
        });
    }
}

fn send(tx: &AnswerTx, answer: Answer) {
    if let Some(tx) = tx.lock().ok().and_then(|mut t| t.take()) {
        let _ = tx.send(answer);
    }
}

/// `"TypeName: message"` of a Python exception.
fn describe_exception(py: Python<'_>, err: &PyErr) -> String {
    let name = err
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    let text = err
        .value(py)
        .str()
        .map(|s| s.to_string())
        .unwrap_or_default();
    if text.is_empty() {
        name
    } else {
        format!("{name}: {text}")
    }
}

/// Converts what a callable returned.
fn decision_from_py(value: &Bound<'_, PyAny>) -> Answer {
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(if b.is_true() {
            Decision::Allow
        } else {
            Decision::Deny
        });
    }
    if let Ok(s) = value.cast::<PyString>() {
        match s.to_cow().as_deref() {
            Ok("allow") => return Ok(Decision::Allow),
            Ok("deny") => return Ok(Decision::Deny),
            Ok("forbidden") => return Ok(Decision::Forbidden),
            _ => {}
        }
    }
    let shown = value
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| format!("a {} value", type_name(value)));
    Err(ApprovalError::new(format!(
        "returned {shown}; expected \"allow\", \"deny\", \"forbidden\", True or False"
    )))
}

static ENSURE_FUTURE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Runs the callable on the loop thread.
#[pyclass(frozen)]
struct ApprovalJob {
    callable: Arc<Py<PyAny>>,
    msg: OmniMessage,
    shared: Shared,
    tx: AnswerTx,
}

#[pymethods]
impl ApprovalJob {
    fn __call__(&self, py: Python<'_>) {
        if self.shared.lock().map(|p| p.cancelled).unwrap_or(true) {
            send(&self.tx, Err(ApprovalError::new("approval cancelled")));
            return;
        }
        let result =
            message_to_py(py, &self.msg).and_then(|dict| self.callable.bind(py).call1((dict,)));
        let value = match result {
            Ok(v) => v,
            Err(e) => {
                send(
                    &self.tx,
                    Err(ApprovalError::new(describe_exception(py, &e))),
                );
                return;
            }
        };
        if !value.hasattr("__await__").unwrap_or(false) {
            send(&self.tx, decision_from_py(&value));
            return;
        }
        let started = (|| -> PyResult<Bound<'_, PyAny>> {
            let ensure = ENSURE_FUTURE.import(py, "asyncio", "ensure_future")?;
            let task = ensure.call1((value,))?;
            let done = ApprovalDone {
                tx: Mutex::new(self.tx.lock().ok().and_then(|mut t| t.take())),
            };
            task.call_method1(intern!(py, "add_done_callback"), (Py::new(py, done)?,))?;
            Ok(task)
        })();
        match started {
            Ok(task) => {
                if let Ok(mut p) = self.shared.lock() {
                    p.task = Some(task.unbind());
                }
            }
            Err(e) => send(
                &self.tx,
                Err(ApprovalError::new(describe_exception(py, &e))),
            ),
        }
    }
}

/// The done-callback of an async callable's task.
#[pyclass(frozen)]
struct ApprovalDone {
    tx: AnswerTx,
}

#[pymethods]
impl ApprovalDone {
    fn __call__(&self, py: Python<'_>, task: &Bound<'_, PyAny>) {
        let answer = (|| -> PyResult<Answer> {
            if task.call_method0(intern!(py, "cancelled"))?.is_truthy()? {
                return Ok(Err(ApprovalError::new("the approval task was cancelled")));
            }
            let exc = task.call_method0("exception")?;
            if !exc.is_none() {
                let err = PyErr::from_value(exc);
                return Ok(Err(ApprovalError::new(describe_exception(py, &err))));
            }
            Ok(decision_from_py(&task.call_method0("result")?))
        })()
        .unwrap_or_else(|e| Err(ApprovalError::new(describe_exception(py, &e))));
        send(&self.tx, answer);
    }
}

/// Cancels a started asyncio task of an abandoned decision.
#[pyclass(frozen)]
struct CancelApproval {
    shared: Shared,
}

#[pymethods]
impl CancelApproval {
    fn __call__(&self, py: Python<'_>) {
        let task = self.shared.lock().ok().and_then(|mut p| p.task.take());
        if let Some(task) = task {
            let _ = task.bind(py).call_method0("cancel");
        }
    }
}

/// An approval policy: built by the helpers of `penguin_harness.approval`, passed as
/// `approve=` to `Session.run`. Evaluated by the core.
#[pyclass(frozen, module = "penguin_harness", name = "Policy")]
pub struct PyPolicy {
    pub spec: PolicySpec,
}

/// A policy argument: a `Policy`, or a callable (which becomes an ask leaf).
pub fn policy_from_py(obj: &Bound<'_, PyAny>) -> Result<PolicySpec, BindingError> {
    if let Ok(p) = obj.cast::<PyPolicy>() {
        return Ok(p.get().spec.clone());
    }
    if obj.is_callable() {
        return Ok(Policy::Ask(Arc::new(obj.clone().unbind())));
    }
    Err(BindingError::Argument(format!(
        "expected a Policy or a callable taking the tool_call message, got {}",
        type_name(obj)
    )))
}

fn callable_arg(obj: &Bound<'_, PyAny>, what: &str) -> Result<Arc<Py<PyAny>>, BindingError> {
    if obj.is_callable() {
        Ok(Arc::new(obj.clone().unbind()))
    } else {
        Err(BindingError::Argument(format!(
            "{what} must be a callable taking the tool_call message, got {}",
            type_name(obj)
        )))
    }
}

fn decision_name(name: &str) -> Result<Decision, BindingError> {
    match name {
        "allow" => Ok(Decision::Allow),
        "deny" => Ok(Decision::Deny),
        "forbidden" => Ok(Decision::Forbidden),
        other => Err(BindingError::Argument(format!(
            "unknown decision \"{other}\" (expected allow, deny or forbidden)"
        ))),
    }
}

#[pymethods]
impl PyPolicy {
    #[staticmethod]
    fn decide(decision: &str) -> Result<Self, BindingError> {
        Ok(PyPolicy {
            spec: Policy::Decide(decision_name(decision)?),
        })
    }

    #[staticmethod]
    fn ask(ask: &Bound<'_, PyAny>) -> Result<Self, BindingError> {
        Ok(PyPolicy {
            spec: Policy::Ask(callable_arg(ask, "ask")?),
        })
    }

    #[staticmethod]
    #[pyo3(signature = (name, ask = None))]
    fn mode(name: &str, ask: Option<&Bound<'_, PyAny>>) -> Result<Self, BindingError> {
        let mode: ApprovalMode = name.parse()?;
        let ask = ask.map(|a| callable_arg(a, "ask")).transpose()?;
        Ok(PyPolicy {
            spec: mode.policy(ask)?,
        })
    }

    #[staticmethod]
    fn when_tools(tools: Vec<String>, then: &Bound<'_, PyAny>) -> Result<Self, BindingError> {
        Ok(PyPolicy {
            spec: Policy::when(Matcher::Tools(tools), policy_from_py(then)?),
        })
    }

    #[staticmethod]
    fn when_permission(permission: &str, then: &Bound<'_, PyAny>) -> Result<Self, BindingError> {
        Ok(PyPolicy {
            spec: Policy::when(
                Matcher::Permission(parse_permission(permission)?),
                policy_from_py(then)?,
            ),
        })
    }

    #[staticmethod]
    #[pyo3(signature = (tool, field, pattern, then, *, whole = true))]
    fn when_argument(
        tool: &str,
        field: &str,
        pattern: &str,
        then: &Bound<'_, PyAny>,
        whole: bool,
    ) -> Result<Self, BindingError> {
        let kind = if whole {
            MatchKind::Whole
        } else {
            MatchKind::Search
        };
        Ok(PyPolicy {
            spec: Policy::when(
                Matcher::argument(tool, field, pattern, kind)?,
                policy_from_py(then)?,
            ),
        })
    }

    #[staticmethod]
    fn first_match(policies: Vec<Bound<'_, PyAny>>) -> Result<Self, BindingError> {
        Ok(PyPolicy {
            spec: Policy::FirstMatch(
                policies
                    .iter()
                    .map(policy_from_py)
                    .collect::<Result<_, _>>()?,
            ),
        })
    }

    fn __repr__(&self) -> String {
        format!("Policy({})", self.spec)
    }
}

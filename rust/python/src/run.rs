//! `Run`: one task of a session as a Python async iterator of OmniMessage dicts.
//!
//! The run starts on the first `__anext__` (like an async generator), so it always knows the
//! consumer's event loop: approval callbacks are scheduled there (see `approve`). Each
//! `__anext__` first tries the core stream without waiting (`RunHandle::try_next`): a buffered
//! message comes back as an already-resolved future. Otherwise a tokio task waits for the next
//! message and resolves a fresh `loop.create_future()` through `call_soon_threadsafe`
//! ([`Deliver`]).
//!
//! Ending early: dropping the `Run` (e.g. `break` out of `async for`, which does not call
//! `aclose()`) aborts the core run at once; `aclose()` aborts and resolves when the run has
//! ended (carry-over saved, trace flushed); `abort()` aborts and lets the caller read the rest
//! (the `abort` event comes last). Cancelling the task that awaits `__anext__` cancels that
//! future, whose done-callback ([`AbortIfCancelled`]) aborts the run and drains it, so the
//! engine never waits on a consumer that is gone.

use std::sync::{Arc, Mutex};

use penguin_harness_core::engine::RunOptions;
use penguin_harness_core::llm::ThinkingLevel;
use penguin_harness_core::protocol::OmniMessage;
use penguin_harness_core::session::TryNext;
use penguin_harness_core::{RunHandle, Session};
use pyo3::exceptions::PyStopAsyncIteration;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use tokio_util::sync::CancellationToken;

use crate::approve::{LoopCtx, PolicySpec, PyApprover, call_soon_threadsafe};
use crate::convert::message_to_py;
use crate::errors::BindingError;
use crate::runtime;

type SharedHandle = Arc<tokio::sync::Mutex<RunHandle>>;

/// What a run needs to start.
struct Start {
    session: Arc<Session>,
    input: Vec<OmniMessage>,
    policy: Option<PolicySpec>,
    thinking: Option<ThinkingLevel>,
}

/// A started run.
#[derive(Clone)]
struct Active {
    handle: SharedHandle,
    cancel: CancellationToken,
    event_loop: Arc<Py<PyAny>>,
}

enum State {
    NotStarted(Box<Start>),
    Running(Active),
    Finished,
}

/// The async iterator returned by `Session.run`.
#[pyclass(frozen, module = "penguin_harness", name = "Run")]
pub struct PyRun {
    state: Mutex<State>,
}

static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static COPY_CONTEXT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

impl PyRun {
    /// A run that starts on first iteration.
    pub fn new(
        session: Arc<Session>,
        input: Vec<OmniMessage>,
        policy: Option<PolicySpec>,
        thinking: Option<ThinkingLevel>,
    ) -> Self {
        PyRun {
            state: Mutex::new(State::NotStarted(Box::new(Start {
                session,
                input,
                policy,
                thinking,
            }))),
        }
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, State>, BindingError> {
        self.state
            .lock()
            .map_err(|_| BindingError::Usage("the run's state lock is poisoned".into()))
    }

    /// The started run, starting it if needed; `None` once finished.
    fn active(&self, py: Python<'_>) -> Result<Option<Active>, BindingError> {
        let start = {
            let mut state = self.lock()?;
            match std::mem::replace(&mut *state, State::Finished) {
                State::Running(a) => {
                    *state = State::Running(a.clone());
                    return Ok(Some(a));
                }
                State::Finished => return Ok(None),
                State::NotStarted(start) => start,
            }
        };
        let active = start_run(py, *start)?;
        *self.lock()? = State::Running(active.clone());
        Ok(Some(active))
    }

    fn finish(&self) {
        if let Ok(mut s) = self.state.lock() {
            *s = State::Finished;
        }
    }
}

fn start_run(py: Python<'_>, start: Start) -> Result<Active, BindingError> {
    let event_loop = GET_RUNNING_LOOP
        .import(py, "asyncio", "get_running_loop")?
        .call0()
        .map_err(|_| {
            BindingError::Usage(
                "a run must be iterated inside a running asyncio event loop (`async for msg in session.run(...)`)".into(),
            )
        })?;
    let context = COPY_CONTEXT
        .import(py, "contextvars", "copy_context")?
        .call0()?;
    let lp = LoopCtx {
        event_loop: Arc::new(event_loop.unbind()),
        context: Arc::new(context.unbind()),
    };
    let approver = start.policy.map(|spec| {
        let bound = spec.map_ask(&mut |callable| {
            Arc::new(PyApprover::new(callable.clone(), lp.clone()))
                as Arc<dyn penguin_harness_core::approval::Approver>
        });
        start.session.policy_approver(bound)
    });
    let rt = runtime::handle()?;
    let handle = {
        let _in_runtime = rt.enter();
        start.session.run(
            start.input,
            RunOptions {
                approver,
                thinking: start.thinking,
            },
        )?
    };
    Ok(Active {
        cancel: handle.cancel_token(),
        handle: Arc::new(tokio::sync::Mutex::new(handle)),
        event_loop: lp.event_loop,
    })
}

/// A future already resolved with `value`.
fn resolved<'py>(
    py: Python<'py>,
    event_loop: &Py<PyAny>,
    value: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let fut = event_loop
        .bind(py)
        .call_method0(intern!(py, "create_future"))?;
    fut.call_method1(intern!(py, "set_result"), (value,))?;
    Ok(fut)
}

/// The current running loop (for methods that may be called before the run started).
fn running_loop(py: Python<'_>) -> Result<Py<PyAny>, BindingError> {
    Ok(GET_RUNNING_LOOP
        .import(py, "asyncio", "get_running_loop")?
        .call0()
        .map_err(|_| BindingError::Usage("no running asyncio event loop".into()))?
        .unbind())
}

/// Waits for everything left in the run, discarding it (it is in the trace).
async fn drain(handle: SharedHandle) {
    let mut h = handle.lock().await;
    while h.next().await.is_some() {}
}

#[pymethods]
impl PyRun {
    fn __aiter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __anext__<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyAny>, BindingError> {
        let Some(active) = self.active(py)? else {
            return Err(PyStopAsyncIteration::new_err(()).into());
        };
        if let Ok(mut h) = active.handle.try_lock() {
            match h.try_next() {
                TryNext::Message(m) => {
                    let dict = message_to_py(py, &m)?;
                    return Ok(resolved(py, &active.event_loop, dict)?);
                }
                TryNext::Done => {
                    drop(h);
                    self.finish();
                    return Err(PyStopAsyncIteration::new_err(()).into());
                }
                TryNext::Empty => {}
            }
        }
        let fut = active
            .event_loop
            .bind(py)
            .call_method0(intern!(py, "create_future"))?;
        let watcher = AbortIfCancelled {
            cancel: active.cancel.clone(),
            handle: active.handle.clone(),
        };
        fut.call_method1(intern!(py, "add_done_callback"), (Py::new(py, watcher)?,))?;
        let target = Arc::new(fut.clone().unbind());
        let event_loop = active.event_loop.clone();
        let handle = active.handle.clone();
        runtime::handle()?.spawn(async move {
            let next = handle.lock().await.next().await;
            drop(handle);
            let outcome = match next {
                Some(m) => Outcome::Message(Box::new(m)),
                None => Outcome::End,
            };
            deliver(event_loop, target, outcome).await;
        });
        Ok(fut)
    }

    /// Aborts the run and resolves once it has ended.
    fn aclose<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyAny>, BindingError> {
        let state = std::mem::replace(&mut *self.lock()?, State::Finished);
        let State::Running(active) = state else {
            let event_loop = running_loop(py)?;
            return Ok(resolved(py, &event_loop, py.None().into_bound(py))?);
        };
        active.cancel.cancel();
        let fut = active
            .event_loop
            .bind(py)
            .call_method0(intern!(py, "create_future"))?;
        let target = Arc::new(fut.clone().unbind());
        runtime::handle()?.spawn(async move {
            drain(active.handle).await;
            deliver(active.event_loop, target, Outcome::Closed).await;
        });
        Ok(fut)
    }

    /// Aborts the run; iteration continues up to its `abort` event.
    fn abort(&self) -> Result<(), BindingError> {
        let mut state = self.lock()?;
        match &*state {
            State::Running(a) => a.cancel.cancel(),
            State::NotStarted(_) => *state = State::Finished,
            State::Finished => {}
        }
        Ok(())
    }

    fn __aenter__(slf: Bound<'_, Self>) -> Result<Bound<'_, PyAny>, BindingError> {
        let py = slf.py();
        let event_loop = running_loop(py)?;
        Ok(resolved(py, &event_loop, slf.into_any())?)
    }

    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _exc_type: &Bound<'py, PyAny>,
        _exc: &Bound<'py, PyAny>,
        _tb: &Bound<'py, PyAny>,
    ) -> Result<Bound<'py, PyAny>, BindingError> {
        self.aclose(py)
    }
}

impl Drop for PyRun {
    fn drop(&mut self) {
        if let Ok(State::Running(a)) = self.state.get_mut().map(|s| &*s) {
            a.cancel.cancel();
        }
    }
}

enum Outcome {
    Message(Box<OmniMessage>),
    End,
    Closed,
}

async fn deliver(event_loop: Arc<Py<PyAny>>, fut: Arc<Py<PyAny>>, outcome: Outcome) {
    let job = Deliver {
        fut,
        outcome: Mutex::new(Some(outcome)),
    };
    runtime::with_python(move |py| call_soon_threadsafe(py, &event_loop, job, None)).await;
}

/// Resolves an `__anext__` / `aclose()` future on the loop thread.
#[pyclass(frozen)]
struct Deliver {
    fut: Arc<Py<PyAny>>,
    outcome: Mutex<Option<Outcome>>,
}

#[pymethods]
impl Deliver {
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        let fut = self.fut.bind(py);
        if fut.call_method0(intern!(py, "done"))?.is_truthy()? {
            return Ok(()); // cancelled meanwhile; the watcher aborted the run
        }
        let outcome = self.outcome.lock().ok().and_then(|mut o| o.take());
        match outcome {
            Some(Outcome::Message(m)) => {
                fut.call_method1(intern!(py, "set_result"), (message_to_py(py, &m)?,))?;
            }
            Some(Outcome::End) => {
                fut.call_method1(
                    intern!(py, "set_exception"),
                    (PyStopAsyncIteration::new_err(()).value(py),),
                )?;
            }
            Some(Outcome::Closed) => {
                fut.call_method1(intern!(py, "set_result"), (py.None(),))?;
            }
            None => {}
        }
        Ok(())
    }
}

/// Done-callback of an `__anext__` future: a cancelled future aborts and drains the run.
#[pyclass(frozen)]
struct AbortIfCancelled {
    cancel: CancellationToken,
    handle: SharedHandle,
}

#[pymethods]
impl AbortIfCancelled {
    fn __call__(&self, fut: &Bound<'_, PyAny>) -> PyResult<()> {
        if fut
            .call_method0(intern!(fut.py(), "cancelled"))?
            .is_truthy()?
        {
            self.cancel.cancel();
            if let Ok(rt) = runtime::handle() {
                rt.spawn(drain(self.handle.clone()));
            }
        }
        Ok(())
    }
}

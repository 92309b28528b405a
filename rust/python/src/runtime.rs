//! The extension's own tokio runtime and the two ways Python and tokio meet.
//!
//! One multi-thread runtime (two workers) is created on first use and shut down by an
//! `atexit` hook ([`shutdown`]) with a bounded wait while detached from Python: a runtime that
//! outlives the interpreter has been seen to crash CPython during finalization. After the hook
//! ran, [`handle`] fails with [`BindingError::RuntimeClosed`] instead of spawning onto a dead
//! runtime.
//!
//! Crossing points:
//! - Python waiting for Rust: [`wait`] — the single detach-and-wait helper. It releases the
//!   interpreter and blocks the calling thread on a future (used only by short, synchronous
//!   methods such as `Session.dispose()`); no `#[pymethods]` body calls `block_on` itself.
//! - Rust reaching Python: [`with_python`] runs a closure attached to the interpreter on the
//!   runtime's blocking pool, so a tokio worker never waits for the interpreter lock. It uses
//!   `Python::try_attach`, which fails instead of panicking while the interpreter finalizes; the
//!   closure then does not run, and callers treat that as cancellation.

use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use penguin_harness_core::Session;
use pyo3::prelude::*;
use tokio::runtime::{Handle, Runtime};

use crate::errors::BindingError;

/// Worker threads of the runtime: the machines this runs on have two cores, and the engine's
/// work is I/O-bound (HTTP streams, pipes), so two workers keep latency low without oversubscribing.
const WORKER_THREADS: usize = 2;
/// How long the exit hook waits for blocking work (GIL hops, process reaping) before leaving
/// it behind; long enough for a command's SIGTERM→SIGKILL grace (1 s) to run out.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_millis(2_000);

enum State {
    NotStarted,
    Running(Runtime),
    ShutDown,
}

static RUNTIME: Mutex<State> = Mutex::new(State::NotStarted);

/// Sessions created by this process, so the exit hook can kill their background commands
/// before the runtime goes away. Weak: the registry never keeps a session alive.
static SESSIONS: Mutex<Vec<Weak<Session>>> = Mutex::new(Vec::new());

/// The runtime's handle, creating the runtime on first use.
pub fn handle() -> Result<Handle, BindingError> {
    let mut state = RUNTIME
        .lock()
        .map_err(|_| BindingError::RuntimeClosed("the runtime lock is poisoned".into()))?;
    match &*state {
        State::Running(rt) => Ok(rt.handle().clone()),
        State::ShutDown => Err(BindingError::RuntimeClosed(
            "the interpreter is exiting and the harness runtime has shut down".into(),
        )),
        State::NotStarted => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(WORKER_THREADS)
                .thread_name("penguin-harness-rt")
                .enable_all()
                .build()
                .map_err(|e| BindingError::RuntimeClosed(format!("cannot start: {e}")))?;
            let handle = rt.handle().clone();
            *state = State::Running(rt);
            Ok(handle)
        }
    }
}

/// Remembers a session for the exit hook.
pub fn register_session(session: &Arc<Session>) {
    if let Ok(mut all) = SESSIONS.lock() {
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(session));
    }
}

/// Runs `fut` to completion on the runtime while the calling thread is detached from Python.
pub fn wait<F>(py: Python<'_>, fut: F) -> Result<F::Output, BindingError>
where
    F: Future + Send,
    F::Output: Send,
{
    let handle = handle()?;
    Ok(py.detach(|| handle.block_on(fut)))
}

/// Runs `f` attached to Python on the blocking pool; resolves to `None` when it could not run
/// (runtime gone, interpreter finalizing).
pub fn with_python<F, R>(f: F) -> impl Future<Output = Option<R>> + Send + 'static
where
    F: for<'py> FnOnce(Python<'py>) -> R + Send + 'static,
    R: Send + 'static,
{
    let job = handle()
        .ok()
        .map(|h| h.spawn_blocking(move || Python::try_attach(f)));
    async move {
        match job {
            Some(j) => j.await.ok().flatten(),
            None => None,
        }
    }
}

/// Like [`with_python`] without waiting for the result: for `Drop` impls, which must not
/// block. Does nothing outside a runtime thread or after shutdown.
pub fn with_python_detached<F>(f: F)
where
    F: for<'py> FnOnce(Python<'py>) + Send + 'static,
{
    if let Ok(h) = handle() {
        h.spawn_blocking(move || {
            Python::try_attach(f);
        });
    }
}

/// The exit hook: kills the background work of live sessions, then shuts the runtime down,
/// waiting at most [`SHUTDOWN_TIMEOUT`] for blocking tasks. Idempotent.
#[pyfunction]
#[pyo3(name = "_shutdown_runtime")]
pub fn shutdown(py: Python<'_>) {
    let sessions: Vec<Arc<Session>> = SESSIONS
        .lock()
        .map(|mut all| all.drain(..).filter_map(|w| w.upgrade()).collect())
        .unwrap_or_default();
    let rt = match RUNTIME.lock() {
        Ok(mut state) => match std::mem::replace(&mut *state, State::ShutDown) {
            State::Running(rt) => Some(rt),
            _ => None,
        },
        Err(_) => None,
    };
    py.detach(move || {
        if let Some(rt) = rt {
            for s in &sessions {
                // Kills command process groups synchronously; bounded by the runtime timeout
                // below for whatever reaping it leaves to tasks.
                let dispose = async { tokio::time::timeout(SHUTDOWN_TIMEOUT, s.dispose()).await };
                let _ = rt.block_on(dispose);
            }
            drop(sessions);
            rt.shutdown_timeout(SHUTDOWN_TIMEOUT);
        }
    });
}

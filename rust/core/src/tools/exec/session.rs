//! One command session: a `bash -lc <cmd>` process leading its own process group, the threads
//! that watch it, and the collection of its output into tool-call deltas.
//!
//! Data flow: the shell writes into one pipe shared by stdout and stderr (or into a
//! pseudo-terminal, see [`super::pty`]), so the two streams arrive merged in the order they were
//! written. A reader thread decodes the bytes ([`Utf8Decoder`]) into the session's
//! [`CappedBuffer`] and bumps a wake counter; a waiter thread blocks in `waitid` and publishes
//! the exit status. [`CommandSession::collect`], running inside a tool call, drains the buffer
//! into [`ToolOutput`] deltas until the shell exits, the yield window ends, or the call is
//! cancelled. Blocking work (reads, writes, waits) happens only on these dedicated threads,
//! never on a tokio worker; the reader keeps draining even when no call is collecting, so a
//! process never blocks on a full pipe and the harness's memory stays bounded by the buffer cap.
//!
//! "Done" is the shell's exit, not pipe EOF: `sleep 100 &` keeps the pipe open but does not
//! hold a call. After the exit the call drains what the shell wrote before exiting (up to
//! [`POST_EXIT_DRAIN`] while output keeps coming, longer only for bytes that were already in the
//! pipe when the exit was seen). Every session ends in a kill of its whole group (see
//! [`super::group`]).

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, mpsc};
use std::time::Duration;

use nix::fcntl::OFlag;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use portable_pty::MasterPty;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::buffer::{CappedBuffer, Utf8Decoder};
use super::group::{
    self, ExitStatus, HELPER_STACK_BYTES, ReapGate, ReapWait, kill_group_now, reap_gate,
    signal_group, terminate_group,
};
use crate::tools::ToolOutput;

/// The shell every command runs in (SPEC: `bash -lc <cmd>`), resolved through `PATH`.
pub const SHELL: &str = "bash";

/// After the shell exits, how long a call keeps collecting while output keeps coming (SPEC:
/// drain ≤ 50 ms), for what the shell's last writes left in flight.
pub const POST_EXIT_DRAIN: Duration = Duration::from_millis(50);

/// Upper bound on the post-exit drain when bytes written before the exit are still in the pipe
/// (a reader thread that has not been scheduled yet under load); keeps a flood from a leftover
/// background child from holding the call.
pub const POST_EXIT_DRAIN_MAX: Duration = Duration::from_millis(1_000);

/// Bytes per read from the pipe or pty: large enough for pipe throughput, small enough that one
/// decoded chunk is far below the buffer cap.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Stack of the reader and writer threads: they decode and copy into heap buffers only.
const IO_STACK_BYTES: usize = 256 * 1024;

/// Why a command could not be started; the model reads it as `[spawn error: <message>]`.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The working directory is missing.
    #[error("working directory does not exist: {}", .0.display())]
    MissingWorkdir(std::path::PathBuf),
    /// The working directory is a file or something else.
    #[error("working directory is not a directory: {}", .0.display())]
    NotADirectory(std::path::PathBuf),
    /// The output pipe could not be created.
    #[error("failed to create the output pipe: {0}")]
    Pipe(#[source] io::Error),
    /// The shell could not be started.
    #[error("failed to start {SHELL}: {0}")]
    Spawn(#[source] io::Error),
    /// The pseudo-terminal could not be opened or the shell could not be started in it.
    #[error("failed to start {SHELL} in a pseudo-terminal: {0}")]
    Pty(String),
    /// A reader, writer or waiter thread could not be started.
    #[error("failed to start a helper thread: {0}")]
    Thread(#[source] io::Error),
    /// The session manager was disposed; no new commands are accepted.
    #[error("command sessions have been disposed")]
    Disposed,
}

/// What to start.
#[derive(Clone, Debug)]
pub struct SpawnSpec<'a> {
    /// The command text handed to `bash -lc`.
    pub cmd: &'a str,
    /// Working directory (absolute, checked to exist by the caller).
    pub cwd: &'a Path,
    /// Run in a pseudo-terminal instead of pipes.
    pub tty: bool,
    /// Variables set on top of the inherited environment, applied in order (later wins).
    pub env: &'a [(String, String)],
}

/// How a [`CommandSession::collect`] window ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectEnd {
    /// The shell exited; its output has been drained.
    Exited,
    /// The window ended with the shell still running.
    Running,
    /// The call's cancel token fired.
    Cancelled,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Output side shared between the helper threads and collecting calls.
#[derive(Debug, Default)]
struct OutputState {
    buffer: CappedBuffer,
    /// Bytes whose decoded text has been appended to the buffer.
    bytes_read: u64,
    /// The reader saw end of file (every writer closed the pipe or the pty hung up).
    eof: bool,
    exit: Option<ExitStatus>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<OutputState>,
    /// Bytes the reader has taken out of the kernel, counted the moment `read` returns (before
    /// decoding), so bytes being decoded are never invisible to the post-exit drain.
    taken: AtomicU64,
    /// Bumped on every change of `state`; collectors wait on it.
    wake: watch::Sender<u64>,
}

impl Shared {
    fn update(&self, f: impl FnOnce(&mut OutputState)) {
        f(&mut lock(&self.state));
        self.wake.send_modify(|v| *v = v.wrapping_add(1));
    }
}

/// Where `input_command` text goes: a writer thread started on first use.
enum Input {
    /// Not written to yet; holds the stdin pipe or the pty writer.
    Idle(Box<dyn Write + Send>),
    /// The writer thread's queue.
    Running(mpsc::Sender<Vec<u8>>),
    /// Stdin is gone (the writer thread ended or could not start); writes are ignored.
    Closed,
}

/// Something to ask "how many output bytes are waiting in the kernel?".
enum Probe {
    Pipe(OwnedFd),
    Pty(Mutex<Box<dyn MasterPty + Send>>),
}

impl Probe {
    fn pending_bytes(&self) -> u64 {
        match self {
            Probe::Pipe(fd) => fionread(fd.as_raw_fd()),
            Probe::Pty(master) => lock(master).as_raw_fd().map_or(0, fionread),
        }
    }
}

fn fionread(fd: RawFd) -> u64 {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through the pointer, which points to a live local.
    let rc = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    if rc == -1 {
        0
    } else {
        u64::try_from(n).unwrap_or(0)
    }
}

/// A running (or exited, not yet cleaned up) command; see the module docs.
pub struct CommandSession {
    pid: i32,
    cmd: String,
    tty: bool,
    shared: Arc<Shared>,
    input: Mutex<Input>,
    probe: Probe,
    /// Held until the kill sequence ends; keeps the shell a zombie so its group id stays ours.
    gate: Mutex<Option<ReapGate>>,
    killed: AtomicBool,
}

impl std::fmt::Debug for CommandSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandSession")
            .field("pid", &self.pid)
            .field("cmd", &self.cmd)
            .field("tty", &self.tty)
            .field("killed", &self.killed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl CommandSession {
    /// Starts `bash -lc <cmd>` as the leader of a new process group (over pipes, or in a
    /// pseudo-terminal when `spec.tty`), with its reader and waiter threads running.
    pub fn spawn(spec: &SpawnSpec<'_>) -> Result<CommandSession, SpawnError> {
        if spec.tty {
            let parts = super::pty::spawn(spec)?;
            start(
                parts.pid,
                spec,
                parts.reader,
                parts.writer,
                Probe::Pty(Mutex::new(parts.master)),
            )
        } else {
            spawn_pipes(spec)
        }
    }

    /// Pid of the shell, which is also the process group id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The command text as given.
    pub fn cmd(&self) -> &str {
        &self.cmd
    }

    /// Whether the command runs in a pseudo-terminal.
    pub fn tty(&self) -> bool {
        self.tty
    }

    /// The shell's exit status, once it exited.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        lock(&self.shared.state).exit.clone()
    }

    /// Whether the shell is still running.
    pub fn is_running(&self) -> bool {
        lock(&self.shared.state).exit.is_none()
    }

    /// Whether a kill was started.
    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// Writes `chars` to the command's stdin (the pty for tty sessions) without waiting for the
    /// command to read it. A closed stdin is ignored.
    pub fn write(&self, chars: &str) {
        if chars.is_empty() {
            return;
        }
        let mut input = lock(&self.input);
        if let Input::Idle(_) = &*input {
            let Input::Idle(writer) = std::mem::replace(&mut *input, Input::Closed) else {
                return;
            };
            if let Ok(tx) = start_writer(writer) {
                *input = Input::Running(tx);
            }
        }
        if let Input::Running(tx) = &*input {
            if tx.send(chars.as_bytes().to_vec()).is_err() {
                *input = Input::Closed;
            }
        }
    }

    /// Ctrl-C: SIGINT to the whole group (nothing once the session is being killed).
    pub fn interrupt(&self) {
        if !self.is_killed() {
            signal_group(self.pid, Signal::SIGINT);
        }
    }

    /// Kills the group: SIGTERM now, SIGKILL after [`group::KILL_GRACE`]; idempotent, never
    /// blocks.
    pub fn kill(&self) {
        if self.killed.swap(true, Ordering::SeqCst) {
            return;
        }
        let gate = lock(&self.gate).take();
        terminate_group(self.pid, gate);
    }

    /// Kills the group with SIGKILL at once (used when the manager is dropped). A session whose
    /// kill already started is left to it: its SIGKILL is already scheduled, and once that has
    /// run the group id may belong to someone else.
    pub fn kill_now(&self) {
        if self.killed.swap(true, Ordering::SeqCst) {
            return;
        }
        let gate = lock(&self.gate).take();
        kill_group_now(self.pid, gate);
    }

    /// Streams output into `out` for up to `window`: returns [`CollectEnd::Exited`] once the
    /// shell exited and its last output was drained, [`CollectEnd::Running`] when the window ends
    /// first, [`CollectEnd::Cancelled`] as soon as `cancel` fires. Never kills anything.
    pub async fn collect(
        &self,
        window: Duration,
        cancel: &CancellationToken,
        out: &ToolOutput,
    ) -> CollectEnd {
        let mut wake = self.shared.wake.subscribe();
        let deadline = Instant::now().checked_add(window);
        // Phase one: stream while the shell runs.
        loop {
            wake.borrow_and_update();
            let (chunk, exited) = {
                let mut st = lock(&self.shared.state);
                (st.buffer.drain(), st.exit.is_some())
            };
            out.delta(chunk).await;
            if exited {
                break;
            }
            if cancel.is_cancelled() {
                return CollectEnd::Cancelled;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                let tail = lock(&self.shared.state).buffer.drain();
                out.delta(tail).await;
                return CollectEnd::Running;
            }
            tokio::select! {
                changed = wake.changed() => {
                    if changed.is_err() {
                        break; // cannot happen while we hold the session; do not spin
                    }
                }
                _ = sleep_until_opt(deadline) => {}
                _ = cancel.cancelled() => {}
            }
        }
        // Phase two: the shell exited. Drain what it wrote: until EOF, or until the pipe is
        // quiet for the rest of POST_EXIT_DRAIN and every byte that was already written when we
        // got here (in the kernel, or taken by the reader and still being decoded) is in the
        // buffer. The kernel is asked first: a byte moving in between is then counted twice
        // (a longer wait, bounded by POST_EXIT_DRAIN_MAX), never missed.
        let started = Instant::now();
        let in_kernel = self.probe.pending_bytes();
        let target = self.shared.taken.load(Ordering::SeqCst) + in_kernel;
        let soft = started + POST_EXIT_DRAIN;
        let hard = started + POST_EXIT_DRAIN_MAX;
        loop {
            wake.borrow_and_update();
            let (chunk, eof, read) = {
                let mut st = lock(&self.shared.state);
                (st.buffer.drain(), st.eof, st.bytes_read)
            };
            out.delta(chunk).await;
            let now = Instant::now();
            if eof || cancel.is_cancelled() || now >= hard || (now >= soft && read >= target) {
                break;
            }
            let until = if read >= target { soft } else { hard };
            tokio::select! {
                changed = wake.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
                _ = sleep_until(until) => {}
                _ = cancel.cancelled() => {}
            }
        }
        if cancel.is_cancelled() {
            CollectEnd::Cancelled
        } else {
            CollectEnd::Exited
        }
    }
}

impl Drop for CommandSession {
    fn drop(&mut self) {
        // A session nobody holds any more must not leave its group running.
        self.kill();
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => sleep_until(d).await,
        None => std::future::pending().await,
    }
}

fn spawn_pipes(spec: &SpawnSpec<'_>) -> Result<CommandSession, SpawnError> {
    // One pipe for stdout and stderr keeps their relative order. Close-on-exec, so commands
    // spawned concurrently by other calls do not inherit (and hold open) our write end.
    let (read_end, write_end) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| SpawnError::Pipe(e.into()))?;
    let probe = read_end.try_clone().map_err(SpawnError::Pipe)?;
    let stderr_end = write_end.try_clone().map_err(SpawnError::Pipe)?;
    let mut command = Command::new(SHELL);
    command
        .arg("-lc")
        .arg(spec.cmd)
        .current_dir(spec.cwd)
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::from(stderr_end))
        .process_group(0);
    let spawned = command.spawn();
    // Our copies of the write end must close now, or EOF never comes.
    drop(command);
    let mut child = spawned.map_err(SpawnError::Spawn)?;
    let writer: Box<dyn Write + Send> = match child.stdin.take() {
        Some(stdin) => Box::new(stdin),
        None => Box::new(io::sink()),
    };
    let Ok(pid) = i32::try_from(child.id()) else {
        return Err(SpawnError::Spawn(io::Error::other("pid out of range")));
    };
    // `child` is dropped without waiting: the waiter thread owns the exit from here on.
    start(
        pid,
        spec,
        Box::new(std::fs::File::from(read_end)),
        writer,
        Probe::Pipe(probe),
    )
}

/// Starts the waiter and reader threads of a freshly spawned shell.
fn start(
    pid: i32,
    spec: &SpawnSpec<'_>,
    reader: Box<dyn Read + Send>,
    writer: Box<dyn Write + Send>,
    probe: Probe,
) -> Result<CommandSession, SpawnError> {
    let (wake, _) = watch::channel(0u64);
    let shared = Arc::new(Shared {
        state: Mutex::new(OutputState::default()),
        taken: AtomicU64::new(0),
        wake,
    });
    let (gate, reap_wait) = reap_gate();
    if let Err(e) = start_waiter(pid, shared.clone(), reap_wait) {
        // No thread to own the exit: kill and reap here. The wait is for a SIGKILLed process,
        // so it is short even though it blocks (this path only runs out of threads).
        signal_group(pid, Signal::SIGKILL);
        group::reap(pid);
        return Err(SpawnError::Thread(e));
    }
    let session = CommandSession {
        pid,
        cmd: spec.cmd.to_owned(),
        tty: spec.tty,
        shared: shared.clone(),
        input: Mutex::new(Input::Idle(writer)),
        probe,
        gate: Mutex::new(Some(gate)),
        killed: AtomicBool::new(false),
    };
    if let Err(e) = start_reader(reader, shared) {
        session.kill_now(); // the waiter reaps once the shell is gone
        return Err(SpawnError::Thread(e));
    }
    Ok(session)
}

fn start_waiter(pid: i32, shared: Arc<Shared>, reap_wait: ReapWait) -> io::Result<()> {
    std::thread::Builder::new()
        .name("penguin-exec-wait".into())
        .stack_size(HELPER_STACK_BYTES)
        .spawn(move || {
            let status = group::wait_exit_keep_zombie(pid);
            shared.update(|st| st.exit = Some(status));
            drop(shared);
            reap_wait.wait();
            group::reap(pid);
        })
        .map(|_| ())
}

fn start_reader(mut src: Box<dyn Read + Send>, shared: Arc<Shared>) -> io::Result<()> {
    std::thread::Builder::new()
        .name("penguin-exec-read".into())
        .stack_size(IO_STACK_BYTES)
        .spawn(move || {
            let mut buf = vec![0u8; READ_CHUNK_BYTES];
            let mut decoder = Utf8Decoder::default();
            loop {
                match src.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        shared.taken.fetch_add(n as u64, Ordering::SeqCst);
                        let text = decoder.decode(buf.get(..n).unwrap_or_default());
                        shared.update(|st| {
                            st.buffer.append(text);
                            st.bytes_read += n as u64;
                        });
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // EIO is how a pty master reports that the terminal hung up.
                    Err(_) => break,
                }
            }
            let tail = decoder.finish();
            shared.update(|st| {
                st.buffer.append(tail);
                st.eof = true;
            });
        })
        .map(|_| ())
}

fn start_writer(mut sink: Box<dyn Write + Send>) -> io::Result<mpsc::Sender<Vec<u8>>> {
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::Builder::new()
        .name("penguin-exec-write".into())
        .stack_size(IO_STACK_BYTES)
        .spawn(move || {
            // A write to a pipe whose reader is gone raises SIGPIPE in the writing thread;
            // blocked here, it turns into an EPIPE error instead of killing a host that does
            // not ignore SIGPIPE.
            let mut set = SigSet::empty();
            set.add(Signal::SIGPIPE);
            let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None);
            for bytes in rx {
                if sink.write_all(&bytes).and_then(|()| sink.flush()).is_err() {
                    break; // stdin closed: later input is ignored
                }
            }
        })?;
    Ok(tx)
}

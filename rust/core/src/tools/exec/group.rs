//! Process-group plumbing for command sessions: observing the shell's exit without reaping it,
//! signalling the whole group, and the delayed SIGKILL that ends every kill.
//!
//! Why the shell stays a zombie until its kill has finished: a process group id is the pid of
//! its leader (our `bash`). Once the leader is reaped and the rest of the group is gone, the
//! kernel may hand that number to an unrelated process, and a late `killpg` would hit it. The
//! waiter thread therefore observes the exit with `waitid(WNOWAIT)` (SPEC: done = waitpid, not
//! pipe EOF), publishes the status, and reaps only when the session's [`ReapGate`] is released,
//! which happens after the final SIGKILL. While the zombie exists the group id cannot be
//! reused, so every signal we send lands on the right processes.
//!
//! The SIGKILL that follows every SIGTERM by [`KILL_GRACE`] is scheduled on one process-wide
//! timer thread (never a tokio worker, and it still fires when no runtime is running, e.g.
//! while a runtime shuts down and drops its sessions).

use std::io;
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Grace between SIGTERM and the SIGKILL that always follows it (SPEC: kill = SIGTERM to the
/// group, SIGKILL after 1000 ms), so a process can flush and clean up.
pub const KILL_GRACE: Duration = Duration::from_millis(1_000);

/// Stack of the small helper threads (waiter, killer): they only sit in a syscall.
pub(crate) const HELPER_STACK_BYTES: usize = 64 * 1024;

/// How the shell ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal, named like `SIGTERM`.
    Signal(String),
    /// The status could not be read (e.g. another part of the process reaped the child).
    Unknown,
}

/// Name of a signal number: `SIGTERM`, or `SIG<n>` for numbers without a name.
pub fn signal_name(signo: i32) -> String {
    Signal::try_from(signo)
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|_| format!("SIG{signo}"))
}

/// Sends `sig` to the process group `pgid`; a group that is already gone is not an error.
/// Refuses group ids that could name ourselves or init (never produced by a real spawn).
pub fn signal_group(pgid: i32, sig: Signal) {
    if pgid > 1 {
        let _ = killpg(Pid::from_raw(pgid), sig);
    }
}

/// Blocks until `pid` exits and returns its status, leaving it a zombie (`WNOWAIT`).
/// Runs on the session's waiter thread only.
pub fn wait_exit_keep_zombie(pid: i32) -> ExitStatus {
    let Ok(id) = libc::id_t::try_from(pid) else {
        return ExitStatus::Unknown;
    };
    loop {
        // SAFETY: an all-zero siginfo_t is a valid value of this plain C struct, and waitid
        // only writes into the struct we pass.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointer to a live siginfo_t; flags are plain constants.
        let rc = unsafe { libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc == -1 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return ExitStatus::Unknown;
        }
        // SAFETY: waitid succeeded for a child state change, so si_status is initialised.
        let status = unsafe { info.si_status() };
        match info.si_code {
            libc::CLD_EXITED => return ExitStatus::Code(status),
            libc::CLD_KILLED | libc::CLD_DUMPED => {
                return ExitStatus::Signal(signal_name(status));
            }
            // Only WEXITED was asked for; anything else is spurious: wait again.
            _ => continue,
        }
    }
}

/// Reaps an exited child (removes the zombie). Runs on the waiter thread only.
pub fn reap(pid: i32) {
    loop {
        // SAFETY: plain syscall; a null status pointer is allowed.
        let rc = unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        if rc == -1 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return;
    }
}

/// Keeps the shell unreaped while held; dropping it lets the waiter thread reap.
#[derive(Debug)]
pub struct ReapGate {
    _tx: mpsc::Sender<()>,
}

/// The waiter thread's side of a [`ReapGate`]: returns once the gate is dropped.
#[derive(Debug)]
pub struct ReapWait {
    rx: mpsc::Receiver<()>,
}

impl ReapWait {
    /// Blocks until the gate is released.
    pub fn wait(self) {
        while self.rx.recv().is_ok() {}
    }
}

/// A new gate pair.
pub fn reap_gate() -> (ReapGate, ReapWait) {
    let (tx, rx) = mpsc::channel();
    (ReapGate { _tx: tx }, ReapWait { rx })
}

struct KillJob {
    at: Instant,
    pgid: i32,
    gate: Option<ReapGate>,
}

/// The process-wide timer thread for delayed SIGKILLs. Every job has the same delay, so jobs
/// arrive in deadline order and a FIFO queue is a correct timer.
fn killer() -> Option<&'static mpsc::Sender<KillJob>> {
    static KILLER: OnceLock<Option<mpsc::Sender<KillJob>>> = OnceLock::new();
    KILLER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<KillJob>();
            std::thread::Builder::new()
                .name("penguin-exec-killer".into())
                .stack_size(HELPER_STACK_BYTES)
                .spawn(move || {
                    for job in rx {
                        let now = Instant::now();
                        if job.at > now {
                            std::thread::sleep(job.at - now);
                        }
                        signal_group(job.pgid, Signal::SIGKILL);
                        drop(job.gate);
                    }
                })
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

/// SIGTERM to the group now, SIGKILL after [`KILL_GRACE`], then releases `gate` so the shell
/// is reaped. If the timer thread is unavailable the SIGKILL goes out at once.
pub fn terminate_group(pgid: i32, gate: Option<ReapGate>) {
    signal_group(pgid, Signal::SIGTERM);
    let job = KillJob {
        at: Instant::now() + KILL_GRACE,
        pgid,
        gate,
    };
    let leftover = match killer() {
        Some(tx) => tx.send(job).err().map(|e| e.0),
        None => Some(job),
    };
    if let Some(job) = leftover {
        signal_group(job.pgid, Signal::SIGKILL);
    }
}

/// SIGKILL to the group now and release `gate` (the hard kill used when the manager is dropped).
pub fn kill_group_now(pgid: i32, gate: Option<ReapGate>) {
    signal_group(pgid, Signal::SIGKILL);
    drop(gate);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
        assert_eq!(signal_name(libc::SIGINT), "SIGINT");
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL");
        assert_eq!(signal_name(1000), "SIG1000");
    }
}

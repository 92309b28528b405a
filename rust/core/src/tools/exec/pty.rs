//! Starting the shell in a pseudo-terminal (`exec_command` with `tty: true`).
//!
//! portable-pty opens the pair and spawns the shell on the slave side as a session leader with
//! the pty as its controlling terminal, so the shell also leads a new process group (its pgid is
//! its pid, as over pipes). Interactive programs (REPLs, `read -s` prompts, curses) then see a
//! terminal. We keep the master: the reader and writer are dup'd handles of it, used only on
//! dedicated threads because every pty read and write blocks.

use std::io::{Read, Write};

use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};

use super::session::{SHELL, SpawnError, SpawnSpec};

/// Terminal height given to tty commands, in rows (the classic default terminal).
pub const PTY_ROWS: u16 = 24;
/// Terminal width given to tty commands, in columns (the classic default terminal).
pub const PTY_COLS: u16 = 80;

/// A shell running in a fresh pty.
pub(crate) struct PtyParts {
    pub pid: i32,
    pub master: Box<dyn MasterPty + Send>,
    pub reader: Box<dyn Read + Send>,
    pub writer: Box<dyn Write + Send>,
}

fn pty_error(e: impl std::fmt::Display) -> SpawnError {
    SpawnError::Pty(e.to_string())
}

/// Opens a pty and starts `bash -lc <cmd>` on it.
pub(crate) fn spawn(spec: &SpawnSpec<'_>) -> Result<PtyParts, SpawnError> {
    let pair = native_pty_system()
        .openpty(PtySize {
            rows: PTY_ROWS,
            cols: PTY_COLS,
            pixel_width: 0,
            pixel_height: 0,
        })
        .map_err(pty_error)?;
    // Everything fallible on the master happens before the spawn, so a failure leaves no process.
    let reader = pair.master.try_clone_reader().map_err(pty_error)?;
    let writer = pair.master.take_writer().map_err(pty_error)?;

    let mut builder = CommandBuilder::new(SHELL);
    builder.arg("-lc");
    builder.arg(spec.cmd);
    builder.cwd(spec.cwd);
    for (key, value) in spec.env {
        builder.env(key, value);
    }
    let child = pair.slave.spawn_command(builder).map_err(pty_error)?;
    // The parent's slave handle must close, or the master never reports the hang-up.
    drop(pair.slave);
    let pid = child
        .process_id()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| pty_error("the spawned shell has no pid"))?;
    // Dropping the child handle neither kills nor waits; the waiter thread owns the exit.
    drop(child);
    Ok(PtyParts {
        pid,
        master: pair.master,
        reader,
        writer,
    })
}

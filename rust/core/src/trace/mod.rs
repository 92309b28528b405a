//! Traces (SPEC §4): one JSONL file per model context, written by one writer thread.
//!
//! Data flow: the engine hands every traceable message (session_meta, complete model
//! messages, events; never partials or origin-tagged messages) to [`TraceWriter::write`],
//! which serializes it on the caller's side and queues the line. A dedicated OS thread owns
//! the file and appends one `write` per record, so a slow disk never blocks a tokio worker and
//! the file order is the queue order. Writes are best effort: an I/O error is reported once on
//! stderr and never interrupts the agent loop. [`read_trace`] reads a file back, tolerating a
//! torn last line (a crash mid-write) and skipping malformed lines in the middle.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc as std_mpsc;

use tokio::sync::oneshot;

use crate::protocol::{OmniMessage, is_traceable};

/// Errors reading a trace.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be read.
    #[error("cannot read trace {path}: {source}")]
    Io {
        /// The trace file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

enum Command {
    Line(String),
    Flush(oneshot::Sender<()>),
}

/// Handle to a trace file's writer thread. Cheap to clone; the thread ends when the last
/// handle is dropped, after writing everything queued.
#[derive(Clone)]
pub struct TraceWriter {
    tx: std_mpsc::Sender<Command>,
    path: PathBuf,
}

impl TraceWriter {
    /// Opens (creating parents) `path` for appending and starts the writer thread. An existing
    /// file whose last line is torn gets a leading `\n` before the first new record, so the new
    /// records stay on lines of their own.
    pub fn open(path: impl Into<PathBuf>) -> std::io::Result<Self> {
        let path = path.into();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&path)?;
        let torn = ends_without_newline(&mut file)?;
        let (tx, rx) = std_mpsc::channel::<Command>();
        let shown = path.clone();
        std::thread::Builder::new()
            .name("penguin-trace".into())
            .spawn(move || writer_loop(file, torn, rx, shown))?;
        Ok(TraceWriter { tx, path })
    }

    /// The file this writer appends to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues `msg` if the trace records it (see [`is_traceable`]); returns whether it did.
    pub fn write(&self, msg: &OmniMessage) -> bool {
        if !is_traceable(msg) {
            return false;
        }
        let _ = self.tx.send(Command::Line(msg.to_json_line()));
        true
    }

    /// Waits until everything queued before this call is on disk (written and flushed).
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Command::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

fn ends_without_newline(file: &mut File) -> std::io::Result<bool> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(false);
    }
    file.seek(SeekFrom::Start(len - 1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

fn writer_loop(mut file: File, mut torn: bool, rx: std_mpsc::Receiver<Command>, path: PathBuf) {
    let mut warned = false;
    while let Ok(cmd) = rx.recv() {
        match cmd {
            Command::Line(line) => {
                let mut record = String::with_capacity(line.len() + 2);
                if torn {
                    record.push('\n');
                    torn = false;
                }
                record.push_str(&line);
                record.push('\n');
                if let Err(e) = file.write_all(record.as_bytes()) {
                    if !warned {
                        eprintln!("[trace] write to {} failed: {e}", path.display());
                        warned = true;
                    }
                }
            }
            Command::Flush(done) => {
                let _ = file.flush();
                let _ = done.send(());
            }
        }
    }
    let _ = file.flush();
}

/// What [`read_trace_detailed`] found.
#[derive(Debug, Default)]
pub struct TraceContents {
    /// The messages, in file order.
    pub messages: Vec<OmniMessage>,
    /// 1-based numbers of lines in the middle that were not valid messages (skipped).
    pub skipped_lines: Vec<usize>,
    /// The last line was incomplete (a crash mid-write) and was ignored.
    pub torn_tail: bool,
}

/// Reads a trace file: one message per line; a torn last line is ignored, malformed lines in
/// the middle are skipped.
pub fn read_trace(path: &Path) -> Result<Vec<OmniMessage>, TraceError> {
    read_trace_detailed(path).map(|c| c.messages)
}

/// Like [`read_trace`], also reporting what was skipped.
pub fn read_trace_detailed(path: &Path) -> Result<TraceContents, TraceError> {
    let bytes = std::fs::read(path).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let complete_last = text.ends_with('\n');
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = TraceContents::default();
    let count = lines.len();
    for (i, line) in lines.into_iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let is_last = i + 1 == count;
        match serde_json::from_str::<OmniMessage>(line) {
            Ok(msg) => out.messages.push(msg),
            Err(_) if is_last && !complete_last => out.torn_tail = true,
            Err(_) => out.skipped_lines.push(i + 1),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{
        EventType, StopReason, partial_text, request_begin, user_text, with_origin,
    };

    fn tmp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!(
            "ph-trace-{}-{}/{name}",
            std::process::id(),
            rand::random::<u32>()
        ))
    }

    #[tokio::test]
    async fn writes_only_traceable_messages_in_order() {
        let path = tmp("t_001.jsonl");
        let w = TraceWriter::open(&path).unwrap();
        let msgs = [
            user_text("a"),
            partial_text(EventType::Delta, "x", StopReason::Completed),
            with_origin(request_begin(), "child"),
            request_begin(),
        ];
        let written: Vec<bool> = msgs.iter().map(|m| w.write(m)).collect();
        assert_eq!(written, [true, false, false, true]);
        w.flush().await;
        let back = read_trace(&path).unwrap();
        assert_eq!(back, vec![msgs[0].clone(), msgs[3].clone()]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            format!("{}\n{}\n", msgs[0].to_json_line(), msgs[3].to_json_line())
        );
    }

    #[tokio::test]
    async fn torn_tail_is_tolerated_and_healed() {
        let path = tmp("t_001.jsonl");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let first = user_text("first");
        std::fs::write(
            &path,
            format!(
                "{}\nnot json\n{}\n{{\"timestamp\":\"2026",
                first.to_json_line(),
                first.to_json_line()
            ),
        )
        .unwrap();
        let c = read_trace_detailed(&path).unwrap();
        assert_eq!(c.messages.len(), 2);
        assert_eq!(c.skipped_lines, vec![2]);
        assert!(c.torn_tail);
        // Appending after a torn tail starts on a fresh line.
        let w = TraceWriter::open(&path).unwrap();
        let next = request_begin();
        w.write(&next);
        w.flush().await;
        let c = read_trace_detailed(&path).unwrap();
        assert_eq!(c.messages, vec![first.clone(), first, next]);
        assert_eq!(c.skipped_lines, vec![2, 4]);
        assert!(!c.torn_tail);
    }
}

//! One child session as the parent sees it: its run state, its buffers and its queue of
//! pending approvals.
//!
//! Data flow: [`ChildSession::start_run`] starts a round (one [`Session::run`]) and spawns a
//! *pump* task that reads the child's stream to its end. Every message is tagged with the
//! child's id ([`protocol::with_origin`]) and buffered for the parent's next window; the direct
//! child's `partial_text` deltas also go to a text buffer (the model-visible tool output), and
//! its `abort` event decides the round's result. Nothing here waits on the parent: the buffers
//! are capped (oldest dropped) so a child running in the background never blocks and never
//! grows memory without bound.
//!
//! The child's approver ([`ChildApprover`]) does not decide anything itself: it queues the
//! origin-tagged `tool_call` and waits. Whichever parent tool call holds a window on this
//! child (`run_subagent` or `input_subagent`, see `collect`) serves the queue one request at a
//! time through the parent's approver; requests left unanswered when a window closes wait for
//! the next one, and [`ChildSession::kill`] denies them all.
//!
//! A single wake counter (a `watch` channel) signals every change: a new message, a new
//! approval request, the end of a round. Waiters mark the counter seen *before* they look at
//! the state, so no change is ever missed.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::approval::{ApprovalError, Approver, Decision};
use crate::engine::RunOptions;
use crate::protocol::{self, Body, EventPayload, EventType, ModelPayload, OmniMessage, StopReason};
use crate::session::Session;
use crate::tools::ToolResult;

/// Child messages kept for the parent between two windows; beyond it the oldest are dropped
/// (only the parent's live view loses them: the child's own trace keeps everything).
pub const MESSAGE_BUFFER_CAP: usize = 4096;
/// Unread child text kept for the parent's model, in characters (1 MiB); beyond it the oldest
/// text is dropped behind a marker, so a chatty child cannot grow memory without bound.
pub const TEXT_BUFFER_CAP_CHARS: usize = 1024 * 1024;

/// Note of a round whose child task ended with an `abort` event.
pub fn aborted_note(reason: &str) -> String {
    format!("[subagent aborted: {reason}]")
}
/// Note of a round that produced no text.
pub const NO_TEXT_NOTE: &str = "[subagent finished without a text answer]";
/// Note of a round whose run could not start or failed unexpectedly.
pub fn error_note(message: &str) -> String {
    format!("[subagent error: {message}]")
}

/// How one round (one run of the child) ended.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundExit {
    /// `completed` or `failed`.
    pub status: StopReason,
    /// The terminal note, if any.
    pub note: Option<String>,
}

impl RoundExit {
    /// The tool result reporting this round.
    pub fn to_result(&self) -> ToolResult {
        ToolResult {
            stop_reason: Some(self.status),
            note: self.note.clone(),
            images: None,
        }
    }
}

/// Why a round could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The child was killed (its parent disposed it or evicted it).
    #[error("subagent session has been disposed")]
    Killed,
    /// A round is in progress.
    #[error("subagent is still running")]
    Running,
}

/// Unread text with a cap in characters; the oldest text goes first, counted for the marker.
#[derive(Debug, Default)]
pub(crate) struct TextBuffer {
    text: String,
    chars: usize,
    dropped: usize,
    cap: usize,
}

impl TextBuffer {
    pub(crate) fn new(cap: usize) -> Self {
        TextBuffer {
            cap,
            ..TextBuffer::default()
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.text.is_empty() && self.dropped == 0
    }

    pub(crate) fn append(&mut self, text: &str) {
        self.text.push_str(text);
        self.chars += text.chars().count();
        if self.chars > self.cap {
            let excess = self.chars - self.cap;
            let cut = self
                .text
                .char_indices()
                .nth(excess)
                .map_or(self.text.len(), |(i, _)| i);
            self.text.drain(..cut);
            self.chars -= excess;
            self.dropped += excess;
        }
    }

    /// Everything unread, led by a drop marker when text was lost; empties the buffer.
    pub(crate) fn drain(&mut self) -> String {
        let text = std::mem::take(&mut self.text);
        let dropped = std::mem::take(&mut self.dropped);
        self.chars = 0;
        if dropped == 0 {
            text
        } else {
            format!("[... {dropped} chars of earlier subagent output dropped ...]\n{text}")
        }
    }
}

struct PendingApproval {
    seq: u64,
    tool_call: OmniMessage,
    reply: oneshot::Sender<Decision>,
}

struct State {
    running: bool,
    killed: bool,
    exit: Option<RoundExit>,
    messages: VecDeque<OmniMessage>,
    text: TextBuffer,
    approvals: VecDeque<PendingApproval>,
    next_seq: u64,
    /// Cancels the current round (the run handle's token).
    run_cancel: Option<CancellationToken>,
}

impl State {
    /// Forgets requests the child stopped waiting for (its run was aborted meanwhile).
    fn prune_approvals(&mut self) {
        self.approvals.retain(|p| !p.reply.is_closed());
    }
}

/// A child session hosted by a parent's subagent tools; see the module docs.
pub struct ChildSession {
    session: Session,
    state: Mutex<State>,
    wake: watch::Sender<u64>,
    kill: CancellationToken,
}

impl ChildSession {
    /// Wraps a freshly created child session (no round has run yet).
    pub fn new(session: Session) -> Arc<Self> {
        Arc::new(ChildSession {
            session,
            state: Mutex::new(State {
                running: false,
                killed: false,
                exit: None,
                messages: VecDeque::new(),
                text: TextBuffer::new(TEXT_BUFFER_CAP_CHARS),
                approvals: VecDeque::new(),
                next_seq: 0,
                run_cancel: None,
            }),
            wake: watch::Sender::new(0),
            kill: CancellationToken::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock leaves plain data behind; keep going with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn notify(&self) {
        self.wake.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The child's session id (the hop its messages carry in `origin`).
    pub fn session_id(&self) -> &str {
        self.session.id()
    }

    /// The child session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Whether a round is in progress.
    pub fn running(&self) -> bool {
        self.lock().running
    }

    /// Whether the child was killed.
    pub fn killed(&self) -> bool {
        self.lock().killed
    }

    /// How the latest round ended; `None` while it runs or before the first one.
    pub fn exit(&self) -> Option<RoundExit> {
        self.lock().exit.clone()
    }

    /// Tool calls of the child waiting for a decision.
    pub fn pending_approvals(&self) -> usize {
        let mut st = self.lock();
        st.prune_approvals();
        st.approvals.len()
    }

    /// A receiver of the wake counter; mark it seen before inspecting the state.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.wake.subscribe()
    }

    /// Takes the buffered (origin-tagged) messages.
    pub fn drain_messages(&self) -> Vec<OmniMessage> {
        self.lock().messages.drain(..).collect()
    }

    /// Takes the unread text of the direct child (with a drop marker if some was lost).
    pub fn drain_text(&self) -> String {
        self.lock().text.drain()
    }

    /// Whether there are unread messages or text.
    pub fn has_unread(&self) -> bool {
        let st = self.lock();
        !st.messages.is_empty() || !st.text.is_empty()
    }

    /// Starts a round with `prompt` as the child's new user text; the round runs on its own
    /// task and is observed through the buffers and [`ChildSession::running`]. A run the child
    /// session refuses ends the round at once, failed with `[subagent error: <msg>]`.
    pub fn start_run(self: &Arc<Self>, prompt: &str) -> Result<(), StartError> {
        {
            let mut st = self.lock();
            if st.killed {
                return Err(StartError::Killed);
            }
            if st.running {
                return Err(StartError::Running);
            }
            st.running = true;
            st.exit = None;
        }
        let approver: Arc<dyn Approver> = Arc::new(ChildApprover(Arc::downgrade(self)));
        let started = self.session.run(
            vec![protocol::user_text(prompt)],
            RunOptions {
                approver: Some(approver),
                thinking: None,
            },
        );
        match started {
            Ok(handle) => {
                let cancel = handle.cancel_token();
                let killed = {
                    let mut st = self.lock();
                    st.run_cancel = Some(cancel.clone());
                    st.killed
                };
                if killed {
                    cancel.cancel();
                }
                tokio::spawn(self.clone().pump(handle));
                self.notify();
                Ok(())
            }
            Err(e) => {
                {
                    let mut st = self.lock();
                    st.running = false;
                    st.exit = Some(RoundExit {
                        status: StopReason::Failed,
                        note: Some(error_note(&e.to_string())),
                    });
                }
                self.notify();
                Ok(())
            }
        }
    }

    /// Reads one round's stream to its end and records how it ended.
    async fn pump(self: Arc<Self>, mut handle: crate::session::RunHandle) {
        let mut child_abort: Option<String> = None;
        let mut wrote_any = false;
        let mut aborting = false;
        loop {
            let next = tokio::select! {
                biased;
                m = handle.next() => m,
                _ = self.kill.cancelled(), if !aborting => {
                    // Keep reading: the child winds down (its tools are cancelled, it emits its
                    // `abort`) and the stream ends by itself.
                    aborting = true;
                    handle.abort();
                    continue;
                }
            };
            let Some(msg) = next else { break };
            if msg.origin.is_none() {
                match &msg.body {
                    Body::Event(EventPayload::Abort(a)) => {
                        child_abort = Some(a.reason.clone().unwrap_or_else(|| "aborted".into()));
                    }
                    Body::Model(ModelPayload::PartialText(p))
                        if p.event_type == EventType::Delta && !p.text.is_empty() =>
                    {
                        wrote_any = true;
                        self.lock().text.append(&p.text);
                    }
                    _ => {}
                }
            }
            let tagged = protocol::with_origin(msg, self.session_id());
            {
                let mut st = self.lock();
                st.messages.push_back(tagged);
                if st.messages.len() > MESSAGE_BUFFER_CAP {
                    st.messages.pop_front();
                }
            }
            self.notify();
        }
        let finished = handle.finish().await;
        let exit = match (finished, child_abort) {
            (Err(e), _) => RoundExit {
                status: StopReason::Failed,
                note: Some(error_note(&e.to_string())),
            },
            (Ok(()), Some(reason)) => RoundExit {
                status: StopReason::Failed,
                note: Some(aborted_note(&reason)),
            },
            (Ok(()), None) if !wrote_any => RoundExit {
                status: StopReason::Completed,
                note: Some(NO_TEXT_NOTE.to_owned()),
            },
            (Ok(()), None) => RoundExit {
                status: StopReason::Completed,
                note: None,
            },
        };
        let killed = {
            let mut st = self.lock();
            st.running = false;
            st.exit = Some(exit);
            st.killed
        };
        if killed {
            // Released here rather than in `kill`, once the round has wound down.
            self.session.dispose().await;
        }
        self.notify();
    }

    /// Kills the child: aborts the current round (its foreground commands die with it),
    /// denies every pending approval and disposes the child session (which kills its
    /// background commands). Idempotent; returns at once, see [`ChildSession::wait_idle`].
    pub fn kill(&self) {
        let (pending, running) = {
            let mut st = self.lock();
            if st.killed {
                return;
            }
            st.killed = true;
            if let Some(cancel) = &st.run_cancel {
                // Cancelled before the approvals are denied, so the child's engine reads the
                // abort first and skips its pending calls instead of recording denials.
                cancel.cancel();
            }
            (std::mem::take(&mut st.approvals), st.running)
        };
        self.kill.cancel();
        for p in pending {
            let _ = p.reply.send(Decision::Deny);
        }
        if !running {
            let session = self.session.clone();
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn(async move { session.dispose().await });
                }
                // No runtime left (process teardown): nothing can run any more anyway.
                Err(_) => drop(session),
            }
        }
        self.notify();
    }

    /// Waits until no round is running, at most `limit`; returns whether it got there.
    pub async fn wait_idle(&self, limit: Duration) -> bool {
        let mut wake = self.subscribe();
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            wake.borrow_and_update();
            if !self.running() {
                return true;
            }
            tokio::select! {
                changed = wake.changed() => if changed.is_err() { return !self.running() },
                _ = tokio::time::sleep_until(deadline) => return !self.running(),
            }
        }
    }

    /// Queues an approval request; `None` when the child is killed (deny at once).
    fn enqueue_approval(&self, tool_call: OmniMessage) -> Option<oneshot::Receiver<Decision>> {
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.lock();
            if st.killed {
                return None;
            }
            let seq = st.next_seq;
            st.next_seq += 1;
            st.approvals.push_back(PendingApproval {
                seq,
                tool_call,
                reply: tx,
            });
        }
        self.notify();
        Some(rx)
    }

    /// The oldest pending request (`seq`, origin-tagged `tool_call`), left in the queue.
    pub fn next_approval(&self) -> Option<(u64, OmniMessage)> {
        let mut st = self.lock();
        st.prune_approvals();
        st.approvals.front().map(|p| (p.seq, p.tool_call.clone()))
    }

    /// Answers request `seq`; a request already answered or abandoned is ignored.
    pub fn settle(&self, seq: u64, decision: Decision) {
        let pending = {
            let mut st = self.lock();
            let pos = st.approvals.iter().position(|p| p.seq == seq);
            pos.and_then(|i| st.approvals.remove(i))
        };
        if let Some(p) = pending {
            let _ = p.reply.send(decision);
            self.notify();
        }
    }
}

/// The approver a child's runs get: queues each request for the parent's windows.
struct ChildApprover(Weak<ChildSession>);

#[async_trait]
impl Approver for ChildApprover {
    async fn approve(&self, tool_call: &OmniMessage) -> Result<Decision, ApprovalError> {
        let waiting = match self.0.upgrade() {
            Some(child) => {
                let tagged = protocol::with_origin(tool_call.clone(), child.session_id());
                child.enqueue_approval(tagged)
            }
            None => None,
        };
        match waiting {
            // A request dropped unanswered (the child was killed meanwhile) is a denial.
            Some(rx) => Ok(rx.await.unwrap_or(Decision::Deny)),
            None => Ok(Decision::Deny),
        }
    }
}

#[cfg(test)]
mod text_buffer_tests {
    use super::TextBuffer;

    #[test]
    fn keeps_the_newest_chars_and_counts_what_it_dropped() {
        let cases: &[(usize, &[&str], &str)] = &[
            (10, &["hello"], "hello"),
            (
                5,
                &["hello", "!"],
                "[... 1 chars of earlier subagent output dropped ...]\nello!",
            ),
            (
                3,
                &["ééé", "ü"],
                "[... 1 chars of earlier subagent output dropped ...]\nééü",
            ),
            (
                2,
                &["abc", "def"],
                "[... 4 chars of earlier subagent output dropped ...]\nef",
            ),
        ];
        for (cap, parts, want) in cases {
            let mut b = TextBuffer::new(*cap);
            for p in *parts {
                b.append(p);
            }
            assert!(!b.is_empty());
            assert_eq!(b.drain(), *want, "cap {cap} parts {parts:?}");
            assert!(b.is_empty());
            assert_eq!(b.drain(), "");
        }
    }
}

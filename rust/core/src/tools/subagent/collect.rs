//! The window of one parent tool call on a child (`run_subagent`'s foreground phase, an
//! `input_subagent` poll or follow-up).
//!
//! For up to `window`, the collector streams what the child produces: buffered messages are
//! passed through to the parent's consumer (they already carry `origin`) and the direct
//! child's text becomes this call's own output. It also serves the child's approval queue
//! through the parent's approver, one request at a time. The window ends when the round ends,
//! when the call is cancelled or at the deadline, after a last drain. A decision still being
//! asked for when the window ends is dropped: the request stays queued for the next window.
//! Deciding the call's result is the caller's job.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::session::ChildSession;
use crate::approval::{Approver, Decision};
use crate::protocol::OmniMessage;
use crate::tools::ToolOutput;

type Asking = Option<(u64, BoxFuture<'static, Decision>)>;

/// Runs one window; see the module docs.
pub(crate) async fn collect_window(
    child: &Arc<ChildSession>,
    window: Duration,
    cancel: &CancellationToken,
    approver: Option<&Arc<dyn Approver>>,
    output: &ToolOutput,
) {
    let deadline = Instant::now() + window;
    let mut wake = child.subscribe();
    let mut asking: Asking = None;
    loop {
        wake.borrow_and_update();
        drain(child, output).await;
        if !child.running() || cancel.is_cancelled() || Instant::now() >= deadline {
            break;
        }
        if asking.is_none() {
            asking = child
                .next_approval()
                .map(|(seq, call)| (seq, ask(approver.cloned(), call)));
        }
        tokio::select! {
            changed = wake.changed() => {
                // The sender lives as long as `child`; a closed channel cannot happen, but if
                // it did, waiting out the window is the safe reading.
                if changed.is_err() {
                    tokio::select! {
                        _ = sleep_until(deadline) => {}
                        _ = cancel.cancelled() => {}
                    }
                }
            }
            _ = sleep_until(deadline) => {}
            _ = cancel.cancelled() => {}
            (seq, decision) = answer(&mut asking) => {
                asking = None;
                child.settle(seq, decision);
            }
        }
    }
    drain(child, output).await;
}

/// Streams the child's unread messages and text into this call's output.
pub(crate) async fn drain(child: &ChildSession, output: &ToolOutput) {
    for msg in child.drain_messages() {
        output.forward(msg).await;
    }
    output.delta(child.drain_text()).await;
}

/// Asks the parent's approver about one of the child's calls. No approver denies (SPEC §5); an
/// approver that fails or panics denies too, so the child never waits forever on it.
fn ask(approver: Option<Arc<dyn Approver>>, call: OmniMessage) -> BoxFuture<'static, Decision> {
    async move {
        let Some(approver) = approver else {
            return Decision::Deny;
        };
        match std::panic::AssertUnwindSafe(approver.approve(&call))
            .catch_unwind()
            .await
        {
            Ok(Ok(decision)) => decision,
            Ok(Err(_)) | Err(_) => Decision::Deny,
        }
    }
    .boxed()
}

/// The decision being asked for, or never when nothing is being asked.
async fn answer(asking: &mut Asking) -> (u64, Decision) {
    match asking {
        Some((seq, fut)) => (*seq, fut.await),
        None => std::future::pending().await,
    }
}

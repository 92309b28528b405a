//! The protocol-independent part of one streaming request: HTTP, SSE, idle timeout, cancel,
//! back-pressure and the interruption close-out.
//!
//! Data flow: [`run`] sends the prepared request, checks the status and content type, then
//! reads the body chunk by chunk. Each read is bounded by the idle timeout (reset on every
//! read); each chunk goes through the [`SseParser`]; each event goes to the protocol's
//! [`Decoder`], which feeds [`Segments`]; the queued messages are sent to `out` right after
//! each event, so a complete tool call leaves while the stream is still running. Waiting on
//! `out` is outside the idle timer. Any interruption (cancel, idle timeout, transport error,
//! decoder failure) closes the open segment with the interruption's stop reason and returns
//! that outcome without usage. Every error message is redacted of the API key.

use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::LlmOutcome;
use super::classify::{self, ProviderError};
use super::segments::Segments;
use super::sse::{SseEvent, SseParser};
use crate::protocol::{OmniMessage, StopReason};

/// Largest error body read from a failed HTTP response (bytes); the message is in the first
/// few hundred bytes and a proxy's HTML page must not be buffered whole.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// How long the close-out after a cancel may wait for the consumer to take each closing
/// message. The consumer normally keeps draining until the request returns; if it stopped
/// reading after cancelling, the client must still return instead of hanging.
const CLOSE_OUT_SEND_GRACE: Duration = Duration::from_secs(1);

/// What a decoder wants after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Keep reading.
    Continue,
    /// The terminal event arrived; stop reading and call [`Decoder::finish`].
    Done,
}

/// One wire protocol's stream decoder.
pub trait Decoder: Send {
    /// Handles one SSE event, feeding `segments`. An `Err` ends the request with that outcome
    /// (the driver closes open segments with its status).
    fn event(&mut self, event: SseEvent, segments: &mut Segments) -> Result<Step, LlmOutcome>;

    /// The stream is over: `saw_terminal` when [`Step::Done`] was returned, false when the
    /// body simply ended. Closes the open segment and returns the outcome (with usage when
    /// completed).
    fn finish(&mut self, saw_terminal: bool, segments: &mut Segments) -> LlmOutcome;

    /// A JSON body arrived instead of a stream (some servers answer errors with HTTP 200 and
    /// `application/json`). The default reports an in-band error or a malformed response.
    fn json_body(&mut self, body: &str) -> LlmOutcome {
        match serde_json::from_str::<serde_json::Value>(body) {
            Ok(v) => match ProviderError::from_value(&v) {
                Some(err) => classify::in_band(&err),
                None => classify::malformed(format!(
                    "expected an event stream but got a JSON body: {}",
                    classify::truncate_chars(body, classify::MAX_PROVIDER_MESSAGE_CHARS)
                )),
            },
            Err(_) => classify::malformed(format!(
                "expected an event stream but got: {}",
                classify::truncate_chars(body, classify::MAX_PROVIDER_MESSAGE_CHARS)
            )),
        }
    }
}

/// The per-request settings of [`run`].
pub struct RunContext<'a> {
    /// The user's abort signal.
    pub cancel: &'a CancellationToken,
    /// Where messages go (bounded).
    pub out: &'a mpsc::Sender<OmniMessage>,
    /// Longest silence tolerated while waiting for the response or the next bytes.
    pub idle_timeout: Duration,
    /// The API key, removed from every error message.
    pub secret: Option<&'a str>,
}

enum Read {
    Cancelled,
    Idle,
    Chunk(bytes::Bytes),
    Failed(reqwest::Error),
    End,
}

/// Runs one request to its outcome; never fails, never retries.
pub async fn run(
    request: reqwest::RequestBuilder,
    decoder: &mut dyn Decoder,
    ctx: RunContext<'_>,
) -> LlmOutcome {
    let mut segments = Segments::new();
    let outcome = run_inner(request, decoder, &ctx, &mut segments).await;
    let outcome = match outcome {
        Ok(outcome) => {
            // Normal ending: the decoder already closed its segments; deliver what is left.
            let aborted = send_pending(&mut segments, &ctx).await;
            match aborted {
                Some(abort) => close_out(abort, &mut segments, &ctx).await,
                None => outcome,
            }
        }
        Err(interruption) => close_out(interruption, &mut segments, &ctx).await,
    };
    redact_outcome(outcome, ctx.secret)
}

fn redact_outcome(mut outcome: LlmOutcome, secret: Option<&str>) -> LlmOutcome {
    if let Some(m) = outcome.error_message.take() {
        outcome.error_message = Some(classify::redact(&m, secret));
    }
    outcome
}

fn aborted() -> LlmOutcome {
    LlmOutcome::error(StopReason::Aborted, "request aborted by user")
}

fn idle(idle_timeout: Duration) -> LlmOutcome {
    LlmOutcome::error(
        StopReason::Timeout,
        format!(
            "no data from the model for {} ms (idle timeout)",
            idle_timeout.as_millis()
        ),
    )
}

/// Closes the open segment with the interruption's reason and delivers the closing messages
/// (bounded wait: the consumer may have stopped reading).
async fn close_out(
    outcome: LlmOutcome,
    segments: &mut Segments,
    ctx: &RunContext<'_>,
) -> LlmOutcome {
    segments.close(outcome.status);
    for msg in segments.drain().collect::<Vec<_>>() {
        match tokio::time::timeout(CLOSE_OUT_SEND_GRACE, ctx.out.send(msg)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => break,
        }
    }
    LlmOutcome {
        usage: None,
        ..outcome
    }
}

/// Sends every pending message, giving up on cancel. Returns the abort outcome when
/// cancelled or when the consumer went away.
async fn send_pending(segments: &mut Segments, ctx: &RunContext<'_>) -> Option<LlmOutcome> {
    while let Some(msg) = segments.pop() {
        let permit = tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => {
                segments.unpop(msg);
                return Some(aborted());
            }
            permit = ctx.out.reserve() => permit,
        };
        match permit {
            Ok(permit) => permit.send(msg),
            Err(_) => {
                return Some(LlmOutcome::error(
                    StopReason::Aborted,
                    "the consumer of the model stream went away",
                ));
            }
        }
    }
    None
}

async fn read_body_limited(response: reqwest::Response, ctx: &RunContext<'_>) -> String {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    loop {
        let next = tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => break,
            r = tokio::time::timeout(ctx.idle_timeout, stream.next()) => r,
        };
        match next {
            Ok(Some(Ok(chunk))) => {
                let room = MAX_ERROR_BODY_BYTES.saturating_sub(body.len());
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if body.len() >= MAX_ERROR_BODY_BYTES {
                    break;
                }
            }
            _ => break,
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

async fn run_inner(
    request: reqwest::RequestBuilder,
    decoder: &mut dyn Decoder,
    ctx: &RunContext<'_>,
    segments: &mut Segments,
) -> Result<LlmOutcome, LlmOutcome> {
    if ctx.cancel.is_cancelled() {
        return Err(aborted());
    }
    let response = tokio::select! {
        biased;
        _ = ctx.cancel.cancelled() => return Err(aborted()),
        r = tokio::time::timeout(ctx.idle_timeout, request.send()) => r,
    };
    let response = match response {
        Err(_) => return Err(idle(ctx.idle_timeout)),
        Ok(Err(e)) => return Err(classify::transport("request failed", &e)),
        Ok(Ok(r)) => r,
    };
    let status = response.status();
    if !status.is_success() {
        let body = read_body_limited(response, ctx).await;
        if ctx.cancel.is_cancelled() {
            return Err(aborted());
        }
        return Err(classify::http_status(status.as_u16(), &body));
    }
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if content_type.starts_with("application/json") {
        let body = read_body_limited(response, ctx).await;
        if ctx.cancel.is_cancelled() {
            return Err(aborted());
        }
        return Err(decoder.json_body(&body));
    }

    let mut stream = response.bytes_stream();
    let mut parser = SseParser::new();
    let mut events: Vec<SseEvent> = Vec::new();
    loop {
        let read = tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => Read::Cancelled,
            r = tokio::time::timeout(ctx.idle_timeout, stream.next()) => match r {
                Err(_) => Read::Idle,
                Ok(None) => Read::End,
                Ok(Some(Err(e))) => Read::Failed(e),
                Ok(Some(Ok(chunk))) => Read::Chunk(chunk),
            },
        };
        let ended = match read {
            Read::Cancelled => return Err(aborted()),
            Read::Idle => return Err(idle(ctx.idle_timeout)),
            Read::Failed(e) => {
                return Err(classify::transport(
                    "the connection failed while streaming",
                    &e,
                ));
            }
            Read::Chunk(chunk) => {
                parser
                    .push(&chunk, &mut events)
                    .map_err(|e| classify::malformed(format!("unreadable event stream: {e}")))?;
                false
            }
            Read::End => {
                parser
                    .finish(&mut events)
                    .map_err(|e| classify::malformed(format!("unreadable event stream: {e}")))?;
                true
            }
        };
        for event in events.drain(..) {
            let step = decoder.event(event, segments)?;
            if let Some(abort) = send_pending(segments, ctx).await {
                return Err(abort);
            }
            if step == Step::Done {
                return Ok(finish(decoder, true, segments));
            }
        }
        if ended {
            return Ok(finish(decoder, false, segments));
        }
    }
}

/// Asks the decoder for the outcome and makes sure nothing stays open whatever it did.
fn finish(decoder: &mut dyn Decoder, saw_terminal: bool, segments: &mut Segments) -> LlmOutcome {
    let outcome = decoder.finish(saw_terminal, segments);
    segments.close(outcome.status);
    outcome
}

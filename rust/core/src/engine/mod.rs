//! The agent loop (SPEC §2): one `run` is one task, made of turns.
//!
//! Data flow of a turn: the model client runs on its own task and streams into a bounded
//! channel; the *driver* reads it, forwards every message to the turn's merge queue, and for
//! each complete `tool_call` asks the approver (strictly one at a time: the driver reads
//! nothing else meanwhile), emits the `approval_decision`, and either emits the synthetic
//! denial output or spawns the tool on the Environment, whose messages join the same queue.
//! A single *consumer* drains the queue: it writes each traceable message to the trace and
//! then hands it to the caller, so the trace is the stream minus partials and origin-tagged
//! messages, line for line. `token_usage` and `request_end` follow the model's outcome at once;
//! the turn ends when every tool has finished, and its outputs are fed back in call order.
//!
//! The engine owns the model context (the client is stateless): a turn whose request
//! completed is committed (its input plus the assistant's messages); a failed request is
//! retried with a `[turn_retried]` transcript (tools never re-run); an interrupted one leaves
//! carry-over (case A: outputs plus placeholders; case B: a `[turn_aborted]` transcript) that
//! the next run sends first and never writes to the trace again.

pub mod markers;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::approval::Approver;
use crate::config::ReconnectSettings;
use crate::environment::Environment;
use crate::llm::{LlmOutcome, ModelClient, ModelRequest, ThinkingLevel};
use crate::protocol::{
    self, Body, Decision, EventType, ModelPayload, OmniMessage, StopReason, TokenCounts, ToolSpec,
};
use crate::trace::TraceWriter;

/// Messages buffered between the model client task and the driver. Small on purpose: while
/// an approval is pending the client stops after this many messages instead of buffering a
/// whole response.
const LLM_CHANNEL_CAPACITY: usize = 64;
/// Messages buffered in a turn's merge queue before producers wait for the consumer.
const QUEUE_CAPACITY: usize = 256;
/// Tokens kept free for the response's framing when the output cap is derived from the
/// context window (SPEC §6).
const OUTPUT_CAP_MARGIN_TOKENS: u64 = 1024;
/// Smallest output cap ever sent when the window is nearly full.
const OUTPUT_CAP_FLOOR_TOKENS: u64 = 512;
/// Rough characters per token for estimating the input size.
const CHARS_PER_TOKEN: usize = 4;

/// Output text of a call the approver denied.
pub const DENIED_BY_USER: &str = "Tool call denied by user.";
/// Output text of a call vetoed by policy.
pub const DENIED_BY_POLICY: &str = "Tool call denied by policy.";
/// Placeholder output for a committed call that never got one (case A carry-over).
pub const INTERRUPTED_PLACEHOLDER: &str = "[interrupted: tool aborted by user]";

/// Fixed per-session settings of the loop.
#[derive(Clone, Debug)]
pub struct EngineSettings {
    /// The substituted system prompt.
    pub system_prompt: String,
    /// Max model requests per task (retries excluded); `<= 0` = unlimited.
    pub max_turns: i64,
    /// Reconnect policy.
    pub reconnect: ReconnectSettings,
    /// Output cap; `<= 0` = not sent.
    pub max_tokens: i64,
    /// The model's context window, if known (clamps the output cap).
    pub context_window: Option<u64>,
    /// Thinking level of runs that do not choose one.
    pub default_thinking: Option<ThinkingLevel>,
}

/// Mutable conversation state, persisted across runs (and rebuilt on resume).
#[derive(Clone, Debug, Default)]
pub struct EngineState {
    /// Committed model context: complete messages, oldest first.
    pub context: Vec<OmniMessage>,
    /// Input to send before the next run's new messages (never traced again).
    pub carry_over: Vec<OmniMessage>,
    /// Running token total of the session.
    pub session_tokens: TokenCounts,
    /// `total` of the latest request (context size).
    pub last_request_total: u64,
    /// Completed requests in this session.
    pub session_turns: u64,
    /// How often each provider tool-call id was seen, to make ids unique (`id#2`, ...).
    pub tool_call_ids: HashMap<String, u32>,
}

/// Per-run options.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// Decides every tool call; `None` denies all.
    pub approver: Option<Arc<dyn Approver>>,
    /// Thinking level override for this run.
    pub thinking: Option<ThinkingLevel>,
}

/// Everything one run needs besides the engine.
struct RunCtx {
    approver: Option<Arc<dyn Approver>>,
    thinking: Option<ThinkingLevel>,
    cancel: CancellationToken,
    out: mpsc::Sender<OmniMessage>,
}

/// What one turn produced.
struct TurnResult {
    outcome: LlmOutcome,
    /// Complete thinking/text segments (interrupted ones included), for transcripts.
    segments: Vec<OmniMessage>,
    /// Every complete model message of the response, to commit on success.
    assistant: Vec<OmniMessage>,
    /// Committed (stop `completed`) tool calls, in call order.
    tool_calls: Vec<OmniMessage>,
    /// One output per call that got one, in call order.
    tool_outputs: Vec<OmniMessage>,
}

/// Handle for skipping a reconnect wait from outside the run.
#[derive(Clone, Default)]
pub struct ReconnectSkip {
    notify: Arc<Notify>,
    waiting: Arc<AtomicBool>,
}

impl ReconnectSkip {
    /// Ends the current reconnect wait at once (the retry happens now, no attempt is spent);
    /// `false` when no wait is in progress.
    pub fn skip(&self) -> bool {
        if self.waiting.load(Ordering::SeqCst) {
            self.notify.notify_waiters();
            true
        } else {
            false
        }
    }
}

/// The loop of one session; see the module docs.
pub struct Engine {
    client: Arc<dyn ModelClient>,
    env: Arc<Environment>,
    trace: Option<TraceWriter>,
    settings: EngineSettings,
    tools: Vec<ToolSpec>,
    state: EngineState,
    /// `session_meta` still to be emitted by the first run.
    pending_meta: Option<OmniMessage>,
    skip: ReconnectSkip,
}

impl Engine {
    /// Builds an engine. `session_meta`, when given, is emitted (streamed and traced) at the
    /// start of the first run.
    pub fn new(
        client: Arc<dyn ModelClient>,
        env: Arc<Environment>,
        trace: Option<TraceWriter>,
        settings: EngineSettings,
        session_meta: Option<OmniMessage>,
        state: EngineState,
    ) -> Self {
        let tools = env.list_tools();
        Engine {
            client,
            env,
            trace,
            settings,
            tools,
            state,
            pending_meta: session_meta,
            skip: ReconnectSkip::default(),
        }
    }

    /// The conversation state (for inspection and resume).
    pub fn state(&self) -> &EngineState {
        &self.state
    }

    /// The tools offered to the model.
    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// A handle that can end a reconnect wait early.
    pub fn reconnect_skip(&self) -> ReconnectSkip {
        self.skip.clone()
    }

    /// Whether the first run is still to emit `session_meta`.
    pub fn has_pending_meta(&self) -> bool {
        self.pending_meta.is_some()
    }

    /// Runs one task to its end, streaming every message into `out`. Ends early (with an
    /// `abort` event as the last message) when `cancel` fires, on an auth or permanent model
    /// error, or when reconnects run out. Never fails; a closed `out` only means nobody listens.
    pub async fn run(
        &mut self,
        new_messages: Vec<OmniMessage>,
        opts: RunOptions,
        cancel: CancellationToken,
        out: mpsc::Sender<OmniMessage>,
    ) {
        let ctx = RunCtx {
            approver: opts.approver,
            thinking: opts.thinking.or(self.settings.default_thinking),
            cancel,
            out,
        };
        if let Some(meta) = self.pending_meta.take() {
            self.emit(&ctx, meta).await;
        }
        // The prompt is traced but not echoed; carry-over is never traced again.
        for m in &new_messages {
            self.trace_write(m);
        }
        let mut input = std::mem::take(&mut self.state.carry_over);
        input.extend(new_messages);

        if ctx.cancel.is_cancelled() {
            self.state.carry_over = input;
            self.emit(&ctx, protocol::abort("aborted by user")).await;
            return;
        }

        let mut next_input = input;
        let mut turns: i64 = 0;
        loop {
            if self.settings.max_turns > 0 && turns >= self.settings.max_turns {
                self.state.carry_over = next_input;
                self.emit_max_turns(&ctx).await;
                return;
            }
            turns += 1;

            let mut failed: Vec<TurnResult> = Vec::new();
            let mut attempt_input = next_input.clone();
            let mut reconnects: u32 = 0;
            let turn = loop {
                let turn = self.run_turn(&attempt_input, &ctx, reconnects).await;
                if turn.outcome.status == StopReason::Completed {
                    self.state.context.extend(attempt_input.iter().cloned());
                    self.state.context.extend(turn.assistant.iter().cloned());
                }
                let status = turn.outcome.status;
                if ctx.cancel.is_cancelled() || status == StopReason::Aborted {
                    self.state.carry_over = build_carry_over(&attempt_input, &turn);
                    self.emit(&ctx, protocol::abort("aborted by user")).await;
                    return;
                }
                if status == StopReason::Auth
                    || (status == StopReason::Failed && turn.outcome.permanent)
                {
                    self.state.carry_over = build_carry_over(&attempt_input, &turn);
                    let msg = turn
                        .outcome
                        .error_message
                        .clone()
                        .unwrap_or_else(|| "unknown".into());
                    self.emit(&ctx, protocol::abort(format!("llm request error: {msg}")))
                        .await;
                    return;
                }
                if status == StopReason::Completed {
                    break turn;
                }
                let error_message = turn.outcome.error_message.clone();
                failed.push(turn);
                attempt_input = with_retried_turns(&next_input, &failed);
                let max = self.settings.reconnect.max_retries;
                if reconnects >= max {
                    self.state.carry_over = attempt_input;
                    let reason = match status {
                        StopReason::Malformed => {
                            format!("malformed response failed after {max} retries")
                        }
                        StopReason::Failed => format!(
                            "llm request failed after {max} retries: {}",
                            error_message.unwrap_or_else(|| "unknown".into())
                        ),
                        _ => format!("reconnect failed after {max} retries"),
                    };
                    self.emit(&ctx, protocol::abort(reason)).await;
                    return;
                }
                reconnects += 1;
                if !self.backoff(reconnects, &ctx.cancel).await {
                    self.state.carry_over = attempt_input;
                    self.emit(&ctx, protocol::abort("aborted during reconnect backoff"))
                        .await;
                    return;
                }
            };
            if turn.tool_outputs.is_empty() {
                return;
            }
            next_input = turn.tool_outputs;
        }
    }

    fn trace_write(&self, msg: &OmniMessage) {
        if let Some(t) = &self.trace {
            t.write(msg);
        }
    }

    async fn emit(&self, ctx: &RunCtx, msg: OmniMessage) {
        self.trace_write(&msg);
        let _ = ctx.out.send(msg).await;
    }

    async fn emit_max_turns(&self, ctx: &RunCtx) {
        let text = format!(
            "[reached max turns ({}); stopping]",
            self.settings.max_turns
        );
        for m in [
            protocol::partial_text(EventType::Start, "", StopReason::Completed),
            protocol::partial_text(EventType::Delta, text.clone(), StopReason::Completed),
            protocol::partial_text(EventType::Stop, "", StopReason::Failed),
            protocol::assistant_text(text, StopReason::Failed),
        ] {
            self.emit(ctx, m).await;
        }
    }

    async fn backoff(&self, k: u32, cancel: &CancellationToken) -> bool {
        let wait = Duration::from_millis(self.settings.reconnect.delay_ms(k));
        let notified = self.skip.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        self.skip.waiting.store(true, Ordering::SeqCst);
        let proceed = tokio::select! {
            _ = tokio::time::sleep(wait) => true,
            _ = &mut notified => true,
            _ = cancel.cancelled() => false,
        };
        self.skip.waiting.store(false, Ordering::SeqCst);
        proceed
    }

    /// The output cap for a request over `messages` (SPEC §6).
    fn output_cap(&self, messages: &[OmniMessage]) -> Option<u64> {
        let max = u64::try_from(self.settings.max_tokens)
            .ok()
            .filter(|m| *m > 0)?;
        let Some(window) = self.settings.context_window else {
            return Some(max);
        };
        let chars: usize = self.settings.system_prompt.len()
            + messages
                .iter()
                .map(|m| m.to_json_line().len())
                .sum::<usize>()
            + self
                .tools
                .iter()
                .map(|t| {
                    t.description.len() + t.parameters.as_ref().map_or(0, |p| p.to_string().len())
                })
                .sum::<usize>();
        let est_input = (chars / CHARS_PER_TOKEN) as u64;
        let room = window
            .saturating_sub(est_input)
            .saturating_sub(OUTPUT_CAP_MARGIN_TOKENS);
        Some(max.min(room).max(OUTPUT_CAP_FLOOR_TOKENS))
    }

    /// Rewrites a provider tool-call id already used in this session to `id#N`.
    fn unique_id(&mut self, remap: &mut HashMap<String, String>, id: &str) -> String {
        if let Some(mapped) = remap.get(id) {
            return mapped.clone();
        }
        let seen = self.state.tool_call_ids.entry(id.to_owned()).or_insert(0);
        *seen += 1;
        let mapped = if *seen > 1 {
            format!("{id}#{seen}")
        } else {
            id.to_owned()
        };
        remap.insert(id.to_owned(), mapped.clone());
        mapped
    }

    fn dedupe_ids(&mut self, msg: &mut OmniMessage, remap: &mut HashMap<String, String>) {
        let Body::Model(payload) = &mut msg.body else {
            return;
        };
        let id = match payload {
            ModelPayload::PartialToolCall(p) => &mut p.tool_call_id,
            ModelPayload::ToolCall(p) => &mut p.tool_call_id,
            _ => return,
        };
        let mapped = self.unique_id(remap, id);
        *id = mapped;
    }

    async fn run_turn(
        &mut self,
        input: &[OmniMessage],
        ctx: &RunCtx,
        reconnects_so_far: u32,
    ) -> TurnResult {
        let (q_tx, mut q_rx) = mpsc::channel::<OmniMessage>(QUEUE_CAPACITY);
        let consumer = {
            let trace = self.trace.clone();
            let out = ctx.out.clone();
            async move {
                while let Some(msg) = q_rx.recv().await {
                    if let Some(trace) = &trace {
                        match &msg.origin {
                            // A direct child's session_meta leaves a pointer in this trace.
                            Some(chain) if chain.len() == 1 && protocol::is_session_meta(&msg) => {
                                trace.write(&protocol::subagent(chain[0].clone()));
                            }
                            _ => {
                                trace.write(&msg);
                            }
                        }
                    }
                    let _ = out.send(msg).await;
                }
            }
        };
        let driver = self.drive(input, ctx, reconnects_so_far, q_tx);
        let (turn, ()) = tokio::join!(driver, consumer);
        turn
    }

    async fn drive(
        &mut self,
        input: &[OmniMessage],
        ctx: &RunCtx,
        reconnects_so_far: u32,
        q: mpsc::Sender<OmniMessage>,
    ) -> TurnResult {
        let _ = q.send(protocol::request_begin()).await;

        let mut messages = self.state.context.clone();
        messages.extend_from_slice(input);
        let max_tokens = self.output_cap(&messages);
        let (llm_tx, mut llm_rx) = mpsc::channel(LLM_CHANNEL_CAPACITY);
        let llm_task = tokio::spawn({
            let client = self.client.clone();
            let system = self.settings.system_prompt.clone();
            let tools = self.tools.clone();
            let thinking = ctx.thinking;
            let cancel = ctx.cancel.clone();
            async move {
                let request = ModelRequest {
                    system_prompt: &system,
                    messages: &messages,
                    tools: &tools,
                    thinking,
                    max_tokens,
                };
                client.stream(request, cancel, &llm_tx).await
            }
        });

        let mut remap = HashMap::new();
        let mut segments = Vec::new();
        let mut assistant = Vec::new();
        let mut tool_calls: Vec<OmniMessage> = Vec::new();
        let mut outputs: HashMap<String, OmniMessage> = HashMap::new();
        let mut running = Vec::new();

        while let Some(mut msg) = llm_rx.recv().await {
            self.dedupe_ids(&mut msg, &mut remap);
            if let Some(payload) = msg.model().filter(|p| !p.is_partial()) {
                if matches!(payload, ModelPayload::Thinking(_) | ModelPayload::Text(_)) {
                    segments.push(msg.clone());
                }
                assistant.push(msg.clone());
            }
            let _ = q.send(msg.clone()).await;
            let Some(call) = msg
                .as_tool_call()
                .filter(|c| c.stop_reason == StopReason::Completed)
                .cloned()
            else {
                continue;
            };
            tool_calls.push(msg.clone());
            if ctx.cancel.is_cancelled() {
                continue;
            }
            let Some((decision, why)) = decide(ctx.approver.as_ref(), &msg, &ctx.cancel).await
            else {
                continue; // aborted while waiting: skip silently
            };
            let id = call.tool_call_id.clone();
            let _ = q.send(approval_decision_msg(decision, &id, why)).await;
            if decision != Decision::Allow {
                let text = if decision == Decision::Forbidden {
                    DENIED_BY_POLICY
                } else {
                    DENIED_BY_USER
                };
                let denied =
                    protocol::tool_call_output(text, id.clone(), StopReason::Aborted, None);
                let _ = q.send(denied.clone()).await;
                outputs.insert(id, denied);
                continue;
            }
            let env = self.env.clone();
            let sink = q.clone();
            let cancel = ctx.cancel.clone();
            let approver = ctx.approver.clone();
            running.push((
                id,
                tokio::spawn(
                    async move { env.execute_tool(&call, &cancel, approver, &sink).await },
                ),
            ));
        }

        let outcome = match llm_task.await {
            Ok(o) => o,
            Err(e) => {
                LlmOutcome::error(StopReason::Failed, format!("model client task failed: {e}"))
            }
        };
        if outcome.status == StopReason::Completed {
            let request = outcome.usage.unwrap_or_default();
            self.state.session_tokens = self.state.session_tokens.add(&request);
            self.state.last_request_total = request.total;
            self.state.session_turns += 1;
            let _ = q
                .send(protocol::token_usage(self.state.session_tokens, request))
                .await;
        }
        let _ = q.send(self.request_end(&outcome, reconnects_so_far)).await;

        for (id, handle) in running {
            let out = match handle.await {
                Ok(payload) => protocol::model_msg(ModelPayload::ToolCallOutput(payload)),
                Err(e) => {
                    let failed = protocol::tool_call_output(
                        format!("[tool error] tool task failed: {e}"),
                        id.clone(),
                        StopReason::Failed,
                        None,
                    );
                    let _ = q.send(failed.clone()).await;
                    failed
                }
            };
            outputs.insert(id, out);
        }
        drop(q);

        let mut seen = HashSet::new();
        let tool_outputs = tool_calls
            .iter()
            .filter_map(|c| c.as_tool_call())
            .filter(|c| seen.insert(c.tool_call_id.clone()))
            .filter_map(|c| outputs.remove(&c.tool_call_id))
            .collect();
        TurnResult {
            outcome,
            segments,
            assistant,
            tool_calls,
            tool_outputs,
        }
    }

    fn request_end(&self, outcome: &LlmOutcome, reconnects_so_far: u32) -> OmniMessage {
        let status = outcome.status;
        let retryable = matches!(
            status,
            StopReason::Failed | StopReason::Timeout | StopReason::Malformed
        ) && !outcome.permanent;
        let retry_in_ms = (retryable && reconnects_so_far < self.settings.reconnect.max_retries)
            .then(|| self.settings.reconnect.delay_ms(reconnects_so_far + 1));
        let attempt = (status != StopReason::Completed || reconnects_so_far > 0)
            .then_some(reconnects_so_far + 1);
        protocol::request_end(status, outcome.error_message.clone(), attempt, retry_in_ms)
    }
}

fn approval_decision_msg(decision: Decision, id: &str, why: Option<String>) -> OmniMessage {
    let mut msg = protocol::approval_decision(decision, id);
    if let Body::Event(protocol::EventPayload::ApprovalDecision(p)) = &mut msg.body {
        p.error_message = why;
    }
    msg
}

/// Asks the approver; `None` when the run was aborted meanwhile. No approver denies; an
/// approver that fails or panics denies, with the reason.
async fn decide(
    approver: Option<&Arc<dyn Approver>>,
    msg: &OmniMessage,
    cancel: &CancellationToken,
) -> Option<(Decision, Option<String>)> {
    let Some(approver) = approver else {
        return Some((Decision::Deny, None));
    };
    let ask = std::panic::AssertUnwindSafe(approver.approve(msg)).catch_unwind();
    tokio::select! {
        biased;
        _ = cancel.cancelled() => None,
        res = ask => Some(match res {
            Ok(Ok(d)) => (d, None),
            Ok(Err(e)) => (Decision::Deny, Some(e.to_string())),
            Err(_) => (Decision::Deny, Some("approval callback panicked".to_owned())),
        }),
    }
}

/// Carry-over after an interrupted turn (SPEC §2). Case A (the request completed): the
/// outputs, plus a placeholder for each committed call without one. Case B: the input's tool
/// outputs kept as they are, everything else flattened into one `[turn_aborted]` text.
fn build_carry_over(attempt_input: &[OmniMessage], turn: &TurnResult) -> Vec<OmniMessage> {
    if turn.outcome.status == StopReason::Completed {
        let have: HashSet<&str> = turn
            .tool_outputs
            .iter()
            .filter_map(|o| o.as_tool_call_output().map(|p| p.tool_call_id.as_str()))
            .collect();
        let mut carry = turn.tool_outputs.clone();
        for call in turn.tool_calls.iter().filter_map(|c| c.as_tool_call()) {
            if !have.contains(call.tool_call_id.as_str()) {
                carry.push(protocol::tool_call_output(
                    INTERRUPTED_PLACEHOLDER,
                    call.tool_call_id.clone(),
                    StopReason::Aborted,
                    None,
                ));
            }
        }
        return carry;
    }
    let mut carry: Vec<OmniMessage> = attempt_input
        .iter()
        .filter(|m| m.as_tool_call_output().is_some())
        .cloned()
        .collect();
    let mut lines = Vec::new();
    for m in attempt_input {
        if let Some(ModelPayload::Text(t)) = m.model() {
            match markers::unwrap_synthetic_block(&t.text) {
                Some(inner) if !inner.is_empty() => lines.push(inner.to_owned()),
                Some(_) => {}
                None => lines.push(markers::user_input_line(&t.text)),
            }
        }
    }
    lines.extend(markers::turn_lines(
        &turn.segments,
        &turn.tool_calls,
        &turn.tool_outputs,
    ));
    carry.push(protocol::user_text(markers::block(
        markers::TURN_ABORTED,
        &lines,
    )));
    carry
}

/// The retry input: the original input plus one `[turn_retried]` text transcribing what the
/// failed attempts produced (nothing appended when they produced nothing).
fn with_retried_turns(input: &[OmniMessage], failed: &[TurnResult]) -> Vec<OmniMessage> {
    let lines: Vec<String> = failed
        .iter()
        .flat_map(|t| markers::turn_lines(&t.segments, &t.tool_calls, &t.tool_outputs))
        .collect();
    let mut out = input.to_vec();
    if !lines.is_empty() {
        out.push(protocol::user_text(markers::block(
            markers::TURN_RETRIED,
            &lines,
        )));
    }
    out
}

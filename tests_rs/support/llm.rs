//! Helpers for model-client tests: run one streaming request against a client while
//! collecting everything it emits, check the streaming discipline, and pick out the complete
//! messages for whole-value comparisons.

use penguin_harness_core::config::{ClientType, ModelEntry};
use penguin_harness_core::llm::{
    ClientOptions, LlmOutcome, ModelClient, ModelRequest, build_client,
};
use penguin_harness_core::protocol::{EventType, ModelPayload, OmniMessage, PartialAggregator};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The key every scripted test uses; it must never show up in an error message.
pub const TEST_KEY: &str = "sk-test-SECRET-0123456789";

/// A model entry pointing at a scripted server.
pub fn entry(client_type: ClientType, base_url: &str) -> ModelEntry {
    let mut e = ModelEntry::new("scripted", "scripted-model");
    e.client_type = client_type;
    e.base_url = Some(base_url.to_owned());
    e.api_key = Some(TEST_KEY.to_owned());
    e
}

/// A client for `entry` with the given idle timeout.
pub fn client(entry: &ModelEntry, idle_timeout: Duration) -> Arc<dyn ModelClient> {
    build_client(
        entry,
        ClientOptions {
            idle_timeout,
            http: None,
        },
    )
    .unwrap_or_else(|e| panic!("build_client: {e}"))
}

/// Runs one request to its end and returns everything emitted plus the outcome.
pub async fn run(
    client: &dyn ModelClient,
    request: ModelRequest<'_>,
    cancel: CancellationToken,
) -> (Vec<OmniMessage>, LlmOutcome) {
    let (tx, mut rx) = mpsc::channel(16);
    let producer = async move { client.stream(request, cancel, &tx).await };
    let consumer = async {
        let mut msgs = Vec::new();
        while let Some(m) = rx.recv().await {
            msgs.push(m);
        }
        msgs
    };
    let (outcome, msgs) = tokio::join!(producer, consumer);
    (msgs, outcome)
}

/// The complete model messages, in order (timestamps dropped).
pub fn completes(msgs: &[OmniMessage]) -> Vec<ModelPayload> {
    msgs.iter()
        .filter_map(|m| m.model().filter(|p| !p.is_partial()).cloned())
        .collect()
}

fn without_fidelity(p: &ModelPayload) -> ModelPayload {
    let mut p = p.clone();
    match &mut p {
        ModelPayload::Text(t) => t.fidelity = None,
        ModelPayload::Thinking(t) => t.fidelity = None,
        ModelPayload::ToolCall(t) => t.fidelity = None,
        _ => {}
    }
    p
}

/// Checks SPEC §1's streaming discipline: only model messages; at most one open segment;
/// `start → delta* → stop → complete` with the complete message right after its `stop` and
/// equal to the joined deltas (fidelity aside); `partial_tool_call` names only on `start`;
/// nothing left open. Returns a description of the first violation.
pub fn check_discipline(msgs: &[OmniMessage]) -> Result<(), String> {
    let mut agg = PartialAggregator::new();
    let mut folded: Option<ModelPayload> = None;
    for (i, m) in msgs.iter().enumerate() {
        let Some(p) = m.model() else {
            return Err(format!("message {i} is not a model message"));
        };
        if p.is_partial() {
            if folded.is_some() {
                return Err(format!(
                    "message {i}: a stop was not followed by its complete message"
                ));
            }
            if let ModelPayload::PartialToolCall(tc) = p {
                let named = tc.event_type == EventType::Start;
                if !named && !tc.name.is_empty() {
                    return Err(format!("message {i}: partial_tool_call name outside start"));
                }
            }
            folded = agg.push(m);
            if agg.open_segments() > 1 {
                return Err(format!("message {i}: two segments open at once"));
            }
        } else {
            let Some(f) = folded.take() else {
                return Err(format!(
                    "message {i}: complete message without a stop before it"
                ));
            };
            if f != without_fidelity(p) {
                return Err(format!(
                    "message {i}: complete message {p:?} differs from its joined partials {f:?}"
                ));
            }
        }
    }
    if folded.is_some() || agg.open_segments() != 0 {
        return Err("the stream ended with an open segment".into());
    }
    Ok(())
}

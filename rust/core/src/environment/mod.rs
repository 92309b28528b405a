//! The Environment: runs approved tool calls inside the workspace and closes them out.
//!
//! Data flow for one call: the engine hands a complete `tool_call` to
//! [`Environment::execute_tool`], which emits `start`, resolves the tool, parses and
//! schema-checks the arguments, then runs the tool on its own task with a cancel token that
//! merges the user's abort with the tool's timeout. Tool emissions flow through a bounded
//! channel into the pure [`closeout::Closeout`], which decides what reaches the model. Whatever
//! happens (unknown tool, bad JSON, schema violation, error, panic, a tool that ignores its
//! cancel token) the caller gets a complete `tool_call_output`; nothing here panics or returns
//! an error to the engine.

pub mod closeout;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use crate::approval::Approver;
use crate::config::{Permission, ToolDefinitionConfig};
use crate::protocol::{OmniMessage, ToolCallOutputPayload, ToolCallPayload, ToolSpec};
use crate::tools::{Tool, ToolContext, ToolEmission, ToolOutput, ToolServices, builtin_factory};
pub use closeout::{ABORTED_NOTE, Closeout, Ending, NO_OUTPUT};

/// How long a cancelled tool may take to wind down (the command tools need ~1 s for
/// SIGTERM then SIGKILL) before the Environment drops it and closes the call out anyway.
pub const CANCEL_GRACE: Duration = Duration::from_millis(5_000);

/// Emissions buffered between a tool and the close-out; small, so a flooding tool waits for
/// the consumer instead of growing memory.
const TOOL_CHANNEL_CAPACITY: usize = 64;

struct Registered {
    tool: Arc<dyn Tool>,
    validator: Option<jsonschema::Validator>,
}

/// One session's tools and their execution; see the module docs.
pub struct Environment {
    workspace_dir: PathBuf,
    tools: Vec<Registered>,
    services: ToolServices,
}

impl Environment {
    /// Builds the built-in tools named in `definitions` that are offered to a model with
    /// (`vision = true`) or without vision. Names without a built-in implementation are
    /// skipped, as the SPEC requires.
    pub fn new(
        workspace_dir: impl Into<PathBuf>,
        definitions: Vec<ToolDefinitionConfig>,
        vision: bool,
        services: ToolServices,
    ) -> Self {
        let tools = definitions
            .into_iter()
            .filter(|d| d.offered_to(vision))
            .filter_map(|d| builtin_factory(&d.name).map(|f| f(d, &services)))
            .collect();
        Self::with_tools(workspace_dir, tools, services)
    }

    /// Builds an Environment over explicit tool instances (embedders, tests).
    pub fn with_tools(
        workspace_dir: impl Into<PathBuf>,
        tools: Vec<Arc<dyn Tool>>,
        services: ToolServices,
    ) -> Self {
        let tools = tools
            .into_iter()
            .map(|tool| {
                // Schemas were validated when the config was loaded; a schema that still does
                // not compile disables validation for that tool rather than the tool itself.
                let validator = tool
                    .definition()
                    .parameters
                    .as_ref()
                    .and_then(|s| jsonschema::validator_for(s).ok());
                Registered { tool, validator }
            })
            .collect();
        Environment {
            workspace_dir: workspace_dir.into(),
            tools,
            services,
        }
    }

    /// The workspace.
    pub fn workspace_dir(&self) -> &Path {
        &self.workspace_dir
    }

    /// The session's shared tool services.
    pub fn services(&self) -> &ToolServices {
        &self.services
    }

    /// Ends the Environment's background work: kills every command session (registered or
    /// still inside a call) and refuses new ones. The engine calls it when its session is
    /// disposed. Idempotent.
    pub fn dispose(&self) {
        self.services.commands.dispose();
    }

    /// What the model is offered: `{name, description, parameters}` per tool, config order.
    pub fn list_tools(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .map(|r| r.tool.definition().spec())
            .collect()
    }

    /// The permission of a tool, `None` when unknown.
    pub fn tool_permission(&self, name: &str) -> Option<Permission> {
        self.find(name).map(|r| r.tool.definition().permission)
    }

    fn find(&self, name: &str) -> Option<&Registered> {
        self.tools.iter().find(|r| r.tool.definition().name == name)
    }

    /// Executes one approved call, streaming every message of it into `sink` (partials, passed
    /// through nested messages, the complete output last) and returning the complete output.
    /// Never fails; a closed `sink` only means nobody is listening.
    pub async fn execute_tool(
        &self,
        call: &ToolCallPayload,
        user_cancel: &CancellationToken,
        approver: Option<Arc<dyn Approver>>,
        sink: &mpsc::Sender<OmniMessage>,
    ) -> ToolCallOutputPayload {
        let id = call.tool_call_id.clone();
        let Some(reg) = self.find(&call.name) else {
            let c = Closeout::new(id, 0);
            let _ = sink.send(c.start()).await;
            return emit(sink, c.fail_early(&format!("Unknown tool: {}", call.name))).await;
        };
        let def = reg.tool.definition();
        let closeout = Closeout::new(id.clone(), def.max_output_length);
        let _ = sink.send(closeout.start()).await;

        let args = match parse_arguments(&call.name, &call.arguments) {
            Ok(args) => args,
            Err(text) => return emit(sink, closeout.fail_early(&text)).await,
        };
        if let Some(validator) = &reg.validator {
            if let Some(text) = schema_violation(reg.tool.as_ref(), validator, &args) {
                return emit(sink, closeout.fail_early(&text)).await;
            }
        }

        let ending_and_closeout = self
            .run_tool(
                reg.tool.clone(),
                args,
                closeout,
                user_cancel,
                approver,
                sink,
            )
            .await;
        let (closeout, ending) = ending_and_closeout;
        emit(sink, closeout.finish(ending)).await
    }

    async fn run_tool(
        &self,
        tool: Arc<dyn Tool>,
        args: Map<String, Value>,
        mut closeout: Closeout,
        user_cancel: &CancellationToken,
        approver: Option<Arc<dyn Approver>>,
        sink: &mpsc::Sender<OmniMessage>,
    ) -> (Closeout, Ending) {
        let def = tool.definition();
        let timeout_ms = def.timeout_ms;
        let merged = user_cancel.child_token();
        let (tx, mut rx) = mpsc::channel(TOOL_CHANNEL_CAPACITY);
        let ctx = ToolContext {
            workspace_dir: self.workspace_dir.clone(),
            tool_call_id: closeout_id(&closeout),
            cancel: merged.clone(),
            approver,
            output: ToolOutput::new(tx),
        };
        let mut handle = tokio::spawn({
            let tool = tool.clone();
            async move { tool.execute(args, ctx).await }
        });

        let deadline = u64::try_from(timeout_ms)
            .ok()
            .filter(|ms| *ms > 0)
            .map(|ms| Instant::now() + Duration::from_millis(ms));
        let mut timed_out = false;
        let mut grace: Option<Instant> = None;
        let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
        let mut rx_open = true;

        let joined = loop {
            tokio::select! {
                res = &mut handle => break Some(res),
                em = rx.recv(), if rx_open => match em {
                    Some(em) => forward(&mut closeout, em, sink).await,
                    None => rx_open = false,
                },
                _ = sleep_until(deadline.unwrap_or(far)), if deadline.is_some() && !timed_out => {
                    timed_out = true;
                    merged.cancel();
                }
                _ = merged.cancelled(), if grace.is_none() => {
                    grace = Some(Instant::now() + CANCEL_GRACE);
                }
                _ = sleep_until(grace.unwrap_or(far)), if grace.is_some() => {
                    handle.abort();
                    break None;
                }
            }
        };
        // Everything the tool emitted before it returned is still queued: keep it.
        while let Ok(em) = rx.try_recv() {
            forward(&mut closeout, em, sink).await;
        }
        merged.cancel(); // stops anything the tool left listening on its token

        let mut ending = Ending {
            user_aborted: user_cancel.is_cancelled(),
            timed_out,
            timeout_ms,
            thrown: None,
            result: None,
        };
        match joined {
            Some(Ok(Ok(result))) => ending.result = Some(result),
            Some(Ok(Err(err))) => ending.thrown = Some(err.message),
            Some(Err(join_err)) => {
                ending.thrown = Some(if join_err.is_panic() {
                    format!("tool panicked: {}", panic_message(join_err.into_panic()))
                } else {
                    "tool task was cancelled".to_owned()
                });
            }
            None => {
                ending.thrown = Some(format!(
                    "tool did not stop within {} ms of being cancelled",
                    CANCEL_GRACE.as_millis()
                ));
            }
        }
        (closeout, ending)
    }
}

fn closeout_id(c: &Closeout) -> String {
    match c.start().model() {
        Some(crate::protocol::ModelPayload::PartialToolCallOutput(p)) => p.tool_call_id.clone(),
        _ => String::new(),
    }
}

async fn forward(closeout: &mut Closeout, em: ToolEmission, sink: &mpsc::Sender<OmniMessage>) {
    match em {
        ToolEmission::Delta(text) => {
            if let Some(msg) = closeout.accept(&text) {
                let _ = sink.send(msg).await;
            }
        }
        // Nested session messages pass through untouched; anything without an origin would
        // pollute this call's framing and is dropped.
        ToolEmission::Forward(msg) if msg.has_origin() => {
            let _ = sink.send(msg).await;
        }
        ToolEmission::Forward(_) => {}
    }
}

async fn emit(
    sink: &mpsc::Sender<OmniMessage>,
    (msgs, payload): (Vec<OmniMessage>, ToolCallOutputPayload),
) -> ToolCallOutputPayload {
    for m in msgs {
        let _ = sink.send(m).await;
    }
    payload
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_owned()
    }
}

/// Parses a call's argument string (SPEC §3 step 2): empty and invalid JSON get the exact
/// model-visible texts; valid JSON that is not an object counts as `{}`.
pub fn parse_arguments(name: &str, raw: &str) -> Result<Map<String, Value>, String> {
    if raw.trim().is_empty() {
        return Err(format!(
            "Tool call \"{name}\" failed: the arguments field is empty. Re-issue the call with a complete JSON object."
        ));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Ok(Map::new()),
        Err(e) => Err(format!(
            "Tool call \"{name}\" failed: the arguments are not valid JSON ({e}). Re-issue the call with one complete, valid JSON object."
        )),
    }
}

/// Checks `args` against the tool's schema; returns the model-readable text for the first
/// violation, naming the offending field.
fn schema_violation(
    tool: &dyn Tool,
    validator: &jsonschema::Validator,
    args: &Map<String, Value>,
) -> Option<String> {
    use jsonschema::error::ValidationErrorKind;
    let instance = Value::Object(args.clone());
    let err = validator.iter_errors(&instance).next()?;
    let name = &tool.definition().name;
    let field = err.instance_path().to_string();
    let field = field.trim_start_matches('/').replace('/', ".");
    Some(match err.kind() {
        ValidationErrorKind::Required { property } => {
            tool.missing_argument_text(property.as_str().unwrap_or_default())
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => format!(
            "Tool call \"{name}\" failed: unexpected argument{} {}. Re-issue the call with only the arguments the tool's schema defines.",
            if unexpected.len() == 1 { "" } else { "s" },
            unexpected
                .iter()
                .map(|u| format!("\"{u}\""))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => format!(
            "Tool call \"{name}\" failed: argument \"{field}\" is invalid: {err}. Re-issue the call with arguments that match the tool's schema."
        ),
    })
}

#[cfg(test)]
mod tests;

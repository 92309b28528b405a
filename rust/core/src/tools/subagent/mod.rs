//! `run_subagent` and `input_subagent` (SPEC §3 "Subagents"): delegate a subtask to a child
//! session working in the same workspace.
//!
//! Data flow: `run_subagent` checks its arguments, makes room under the cap, spawns the child
//! through the parent's [`SubagentManager`] and starts its first round; then a window
//! (`collect`) streams the child's origin-tagged messages to the parent's consumer, mirrors the
//! direct child's text as this call's output and serves the child's approvals through the
//! parent's approver. A child that finishes inside the window is disposed and its round result
//! returned; one still running at the deadline is registered as `subagent-<8>` and keeps
//! running in the background, its output buffered (`session`) until `input_subagent` polls it
//! or, once it is idle, gives it a follow-up prompt. Aborting `run_subagent`'s window kills
//! the child; aborting an `input_subagent` window only ends the window.
//!
//! The child's messages reach the parent's consumer only: the Environment keeps them out of
//! this call's output and the parent's engine keeps them out of its trace and its model
//! context (it writes a single `subagent` pointer when the child's `session_meta` passes).

mod collect;
pub mod manager;
pub mod session;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::config::ToolDefinitionConfig;
use crate::tools::clamp_yield;
use crate::tools::{Tool, ToolArgs, ToolContext, ToolError, ToolResult, ToolServices};
pub use manager::{
    MAX_SUBAGENT_DEPTH, MAX_SUBAGENTS, SpawnContext, SpawnError, SpawnRequest, SubagentManager,
};
pub use session::{ChildSession, MESSAGE_BUFFER_CAP, RoundExit, TEXT_BUFFER_CAP_CHARS};

/// Name of the spawning tool.
pub const RUN_SUBAGENT: &str = "run_subagent";
/// Name of the polling / follow-up tool.
pub const INPUT_SUBAGENT: &str = "input_subagent";

/// `run_subagent`'s foreground window when the model gives none (SPEC §3).
pub const DEFAULT_RUN_YIELD_MS: f64 = 300_000.0;
/// `input_subagent`'s window with a follow-up prompt (SPEC §3).
pub const DEFAULT_PROMPT_YIELD_MS: f64 = 300_000.0;
/// `input_subagent`'s window for an empty poll (SPEC §3).
pub const DEFAULT_POLL_YIELD_MS: f64 = 10_000.0;
/// How long an aborted `run_subagent` waits for its killed child to wind down (its commands
/// take up to ~1 s to die), so the call returns after the child is gone; below the
/// Environment's cancel grace.
pub const KILL_WAIT: Duration = Duration::from_millis(3_000);

/// Missing or blank `prompt`.
pub const MISSING_PROMPT_TEXT: &str =
    "[run_subagent error: missing required string argument `prompt`]";
/// Only one half of a model reference.
pub const MODEL_PAIR_TEXT: &str = "[run_subagent error: `model_id` and `provider` must be given together (a model reference is the pair), or both omitted to inherit the parent session's model]";
/// The cap is reached and no finished child can be evicted.
pub const TOO_MANY_TEXT: &str =
    "[run_subagent error: too many background subagents; poll or finish existing ones first]";

/// `[run_subagent error: <msg>]`.
pub fn run_error_text(message: &str) -> String {
    format!("[run_subagent error: {message}]")
}

/// Note of a child moved to the background.
pub fn running_note(id: &str) -> String {
    format!(
        "[subagent running with subagent_id {id}; use input_subagent to poll for progress or send a follow-up prompt]"
    )
}

/// Suffix telling the model that the child waits for approvals (empty when none).
pub fn approval_hint(pending: usize) -> String {
    if pending == 0 {
        String::new()
    } else {
        format!(" [subagent is waiting for approval of {pending} tool call(s); poll to review]")
    }
}

/// Unknown `subagent_id`.
pub fn unknown_id_text(id: &str) -> String {
    format!(
        "[input_subagent error: unknown subagent_id {id} (the session may have finished and been cleared)]"
    )
}

/// A follow-up prompt for a child that is still running.
pub fn still_running_error(id: &str) -> String {
    format!(
        "[input_subagent error: subagent {id} is still running; poll with an empty prompt to collect progress first]"
    )
}

/// Note of a poll that found the child still running.
pub fn still_running_note(id: &str) -> String {
    format!("[subagent still running with subagent_id {id}]")
}

/// Note of a poll that found the child idle.
pub fn idle_note(id: &str) -> String {
    format!("[subagent idle with subagent_id {id}; send a follow-up prompt to continue]")
}

/// Whether `name` is one of the subagent tools (sessions at the depth limit do not get them).
pub fn is_subagent_tool(name: &str) -> bool {
    name == RUN_SUBAGENT || name == INPUT_SUBAGENT
}

/// A string argument, `None` when absent or not a string.
fn string_arg<'a>(args: &'a ToolArgs, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

fn unavailable(tool: &str) -> ToolResult {
    ToolResult::failed(format!(
        "[{tool} error: subagents are not available in this session]"
    ))
}

/// `run_subagent`: spawns a child and runs its first round in the foreground window.
pub struct RunSubagent {
    def: ToolDefinitionConfig,
    manager: Option<Arc<SubagentManager>>,
}

impl RunSubagent {
    /// A tool spawning through `manager` (`None`: every call fails with an explanation).
    pub fn new(def: ToolDefinitionConfig, manager: Option<Arc<SubagentManager>>) -> Self {
        RunSubagent { def, manager }
    }
}

/// The registry factory of `run_subagent`.
pub fn run_subagent_factory(def: ToolDefinitionConfig, services: &ToolServices) -> Arc<dyn Tool> {
    Arc::new(RunSubagent::new(def, services.subagents.clone()))
}

#[async_trait]
impl Tool for RunSubagent {
    fn definition(&self) -> &ToolDefinitionConfig {
        &self.def
    }

    fn missing_argument_text(&self, field: &str) -> String {
        if field == "prompt" {
            MISSING_PROMPT_TEXT.to_owned()
        } else {
            format!(
                "Missing required argument \"{field}\" for {}.",
                self.def.name
            )
        }
    }

    async fn execute(&self, args: ToolArgs, ctx: ToolContext) -> Result<ToolResult, ToolError> {
        let Some(manager) = self.manager.clone() else {
            return Ok(unavailable(RUN_SUBAGENT));
        };
        let prompt = string_arg(&args, "prompt").unwrap_or_default();
        if prompt.trim().is_empty() {
            return Ok(ToolResult::failed(MISSING_PROMPT_TEXT));
        }
        let model = match (string_arg(&args, "provider"), string_arg(&args, "model_id")) {
            (Some(provider), Some(model_id)) => Some((provider.to_owned(), model_id.to_owned())),
            (None, None) => None,
            _ => return Ok(ToolResult::failed(MODEL_PAIR_TEXT)),
        };
        let request = SpawnRequest {
            agent_id: string_arg(&args, "agent_id").map(str::to_owned),
            model,
        };
        let window = clamp_yield(
            args.get("yield_time_ms"),
            DEFAULT_RUN_YIELD_MS,
            self.def.timeout_ms,
        );
        if ctx.cancel.is_cancelled() {
            return Ok(ToolResult::aborted());
        }
        if manager.is_disposed() {
            return Ok(ToolResult::failed(run_error_text(
                &SpawnError::Disposed.to_string(),
            )));
        }
        if !manager.make_room() {
            return Ok(ToolResult::failed(TOO_MANY_TEXT));
        }

        // Creating a session reads configuration and opens the trace: file-system work.
        let spawned = tokio::task::spawn_blocking({
            let manager = manager.clone();
            move || manager.spawn(&request)
        })
        .await;
        let child = match spawned {
            Ok(Ok(child)) => child,
            Ok(Err(e)) => return Ok(ToolResult::failed(run_error_text(&e.to_string()))),
            Err(e) => {
                return Ok(ToolResult::failed(run_error_text(&format!(
                    "spawning the subagent failed: {e}"
                ))));
            }
        };
        if let Err(e) = child.start_run(prompt) {
            child.kill();
            return Ok(ToolResult::failed(run_error_text(&e.to_string())));
        }

        collect::collect_window(
            &child,
            window,
            &ctx.cancel,
            ctx.approver.as_ref(),
            &ctx.output,
        )
        .await;

        if ctx.cancel.is_cancelled() {
            // The window's abort kills the child; let it wind down so its commands are gone
            // when this call reports, and pass on what it said meanwhile.
            child.kill();
            child.wait_idle(KILL_WAIT).await;
            collect::drain(&child, &ctx.output).await;
            return Ok(ToolResult::aborted());
        }
        if child.running() {
            let pending = child.pending_approvals();
            let id = manager.register(child);
            return Ok(ToolResult::completed_with_note(format!(
                "{}{}",
                running_note(&id),
                approval_hint(pending)
            )));
        }
        // Finished inside the window: never registered, released now.
        let exit = child.exit();
        child.kill();
        Ok(exit.map_or_else(ToolResult::completed, |e| e.to_result()))
    }
}

/// `input_subagent`: polls a backgrounded child or gives an idle one a follow-up prompt.
pub struct InputSubagent {
    def: ToolDefinitionConfig,
    manager: Option<Arc<SubagentManager>>,
}

impl InputSubagent {
    /// A tool reaching children through `manager` (`None`: every call fails with an
    /// explanation).
    pub fn new(def: ToolDefinitionConfig, manager: Option<Arc<SubagentManager>>) -> Self {
        InputSubagent { def, manager }
    }
}

/// The registry factory of `input_subagent`.
pub fn input_subagent_factory(def: ToolDefinitionConfig, services: &ToolServices) -> Arc<dyn Tool> {
    Arc::new(InputSubagent::new(def, services.subagents.clone()))
}

#[async_trait]
impl Tool for InputSubagent {
    fn definition(&self) -> &ToolDefinitionConfig {
        &self.def
    }

    async fn execute(&self, args: ToolArgs, ctx: ToolContext) -> Result<ToolResult, ToolError> {
        let Some(manager) = self.manager.clone() else {
            return Ok(unavailable(INPUT_SUBAGENT));
        };
        let id = string_arg(&args, "subagent_id").unwrap_or_default();
        if id.is_empty() {
            return Ok(ToolResult::failed(
                self.missing_argument_text("subagent_id"),
            ));
        }
        let Some(child) = manager.get(id) else {
            return Ok(ToolResult::failed(unknown_id_text(id)));
        };
        let prompt = string_arg(&args, "prompt").unwrap_or_default();
        let has_prompt = !prompt.trim().is_empty();
        let window = clamp_yield(
            args.get("yield_time_ms"),
            if has_prompt {
                DEFAULT_PROMPT_YIELD_MS
            } else {
                DEFAULT_POLL_YIELD_MS
            },
            self.def.timeout_ms,
        );
        if ctx.cancel.is_cancelled() {
            return Ok(ToolResult::aborted());
        }
        if has_prompt {
            if child.running() {
                return Ok(ToolResult::failed(still_running_error(id)));
            }
            if let Err(e) = child.start_run(prompt) {
                return Ok(ToolResult::failed(format!("[input_subagent error: {e}]")));
            }
        }

        collect::collect_window(
            &child,
            window,
            &ctx.cancel,
            ctx.approver.as_ref(),
            &ctx.output,
        )
        .await;

        // An aborted poll ends only the poll: the child keeps its state and keeps running.
        if ctx.cancel.is_cancelled() {
            return Ok(ToolResult::aborted());
        }
        if child.running() {
            return Ok(ToolResult::completed_with_note(format!(
                "{}{}",
                still_running_note(id),
                approval_hint(child.pending_approvals())
            )));
        }
        let mut result = child
            .exit()
            .map_or_else(ToolResult::completed, |e| e.to_result());
        let idle = idle_note(id);
        result.note = Some(match result.note.take() {
            Some(note) => format!("{note} {idle}"),
            None => idle,
        });
        Ok(result)
    }
}

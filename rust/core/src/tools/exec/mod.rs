//! Command sessions (SPEC §3 "Command sessions"): the `exec_command` and `input_command` tools.
//!
//! The shell is the model's universal interface, so these two tools carry most of an agent's
//! work. Data flow for one `exec_command` call: the tool validates `cmd`, resolves `workdir`
//! against the workspace and asks the session's [`CommandSessionManager`] to spawn
//! `bash -lc <cmd>` (over pipes, or in a pseudo-terminal with `tty: true`) as the leader of a new
//! process group. [`CommandSession::collect`] streams the merged stdout+stderr into output
//! deltas until the shell exits (exit status as a note), the yield window ends (the session is
//! registered under a `proc-…` id and keeps running in the background), or the call's cancel
//! token fires (user abort or tool timeout: the group is killed). A command that is not
//! registered when its call returns has its whole group killed, so `&` children die with it.
//!
//! `input_command` finds a registered session, writes `chars` to its stdin (a lone U+0003 is
//! Ctrl-C: SIGINT to the group), then collects new output the same way. Once it reports an
//! exit, the session is removed. Aborting an `input_command` only ends the poll.
//!
//! Modules: [`buffer`] (UTF-8 decoding, the capped unread buffer), [`session`] (one process and
//! its threads), [`pty`] (pseudo-terminal spawning), [`group`] (group signals, exit observation,
//! the delayed SIGKILL), [`manager`] (the registry and its caps).

pub mod buffer;
pub mod group;
pub mod manager;
pub mod pty;
pub mod session;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::tools::clamp_yield;
pub use group::{ExitStatus, KILL_GRACE};
pub use manager::{CommandSessionManager, MAX_SESSIONS, RegisterError, SessionInfo};
pub use session::{CollectEnd, CommandSession, SpawnError};

use crate::config::ToolDefinitionConfig;
use crate::tools::{Tool, ToolArgs, ToolContext, ToolError, ToolResult, ToolServices};

/// `exec_command`'s default foreground window before a command moves to the background (SPEC).
pub const DEFAULT_EXEC_YIELD_MS: f64 = 60_000.0;
/// `input_command`'s default wait after writing characters (SPEC).
pub const DEFAULT_WRITE_YIELD_MS: f64 = 250.0;
/// `input_command`'s default wait for an empty poll (SPEC, seed value).
pub const DEFAULT_EMPTY_POLL_YIELD_MS: f64 = 5_000.0;

/// The Ctrl-C character `input_command` turns into SIGINT.
pub const CTRL_C: &str = "\u{3}";

/// The model-visible note for a command past its yield.
pub fn running_note(id: &str) -> String {
    format!(
        "[process running with process_id {id}; use input_command to send input or poll for output]"
    )
}

/// The model-visible note for a polled command that is still running.
pub fn still_running_note(id: &str) -> String {
    format!("[process still running with process_id {id}]")
}

/// The model-visible text for an id that is not registered.
pub fn unknown_id_text(id: &str) -> String {
    format!(
        "[input_command error: unknown process_id {id} (the session may have exited and been cleared)]"
    )
}

/// The model-visible text for `chars` that mix Ctrl-C with other text.
pub const MIXED_CTRL_C_TEXT: &str = "[input_command error: chars mixes U+0003 (Ctrl-C) with other content; send \"\\u0003\" alone to interrupt]";

/// The result for an exited shell (SPEC): exit 0 completed; otherwise failed with
/// `[exit code: N]` (`unknown` when there is none) or `[terminated by signal SIGxxx]`.
pub fn result_for_exit(status: Option<&ExitStatus>) -> ToolResult {
    match status {
        Some(ExitStatus::Code(0)) => ToolResult::completed(),
        Some(ExitStatus::Code(n)) => ToolResult::failed(format!("[exit code: {n}]")),
        Some(ExitStatus::Signal(name)) => {
            ToolResult::failed(format!("[terminated by signal {name}]"))
        }
        Some(ExitStatus::Unknown) | None => ToolResult::failed("[exit code: unknown]"),
    }
}

fn str_arg<'a>(args: &'a ToolArgs, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// `exec_command {cmd, workdir?, yield_time_ms?, tty?}`; see the module docs.
pub struct ExecCommandTool {
    def: ToolDefinitionConfig,
    manager: Arc<CommandSessionManager>,
}

impl ExecCommandTool {
    /// Builds the tool over the session's manager.
    pub fn new(def: ToolDefinitionConfig, manager: Arc<CommandSessionManager>) -> Self {
        ExecCommandTool { def, manager }
    }
}

/// Factory for [`crate::tools::builtin_factory`].
pub fn exec_command_factory(def: ToolDefinitionConfig, services: &ToolServices) -> Arc<dyn Tool> {
    Arc::new(ExecCommandTool::new(def, services.commands.clone()))
}

#[async_trait]
impl Tool for ExecCommandTool {
    fn definition(&self) -> &ToolDefinitionConfig {
        &self.def
    }

    async fn execute(&self, args: ToolArgs, ctx: ToolContext) -> Result<ToolResult, ToolError> {
        let cmd = str_arg(&args, "cmd");
        if cmd.trim().is_empty() {
            return Ok(ToolResult::failed(self.missing_argument_text("cmd")));
        }
        let workdir = match str_arg(&args, "workdir") {
            "" => ctx.workspace_dir.clone(),
            dir => ctx.workspace_dir.join(dir),
        };
        let tty = args.get("tty").and_then(Value::as_bool).unwrap_or(false);
        let window = clamp_yield(
            args.get("yield_time_ms"),
            DEFAULT_EXEC_YIELD_MS,
            self.def.timeout_ms,
        );
        if ctx.cancel.is_cancelled() {
            return Ok(ToolResult::aborted());
        }
        let session = match self.manager.spawn(cmd, &workdir, tty) {
            Ok(s) => s,
            Err(e) => return Ok(ToolResult::failed(format!("[spawn error: {e}]"))),
        };
        let end = session.collect(window, &ctx.cancel, &ctx.output).await;
        if end == CollectEnd::Cancelled || ctx.cancel.is_cancelled() {
            // User abort or tool timeout: the Environment decides which note applies.
            session.kill();
            return Ok(ToolResult::aborted());
        }
        if end == CollectEnd::Running {
            return match self.manager.register(session.clone()) {
                Ok(id) => Ok(ToolResult::completed_with_note(running_note(&id))),
                Err(e) => {
                    session.kill();
                    Err(ToolError::new(format!(
                        "cannot keep the command running in the background: {e}"
                    )))
                }
            };
        }
        // Exited: kill the group anyway, so whatever it left in the background dies with it.
        session.kill();
        Ok(result_for_exit(session.exit_status().as_ref()))
    }
}

/// `input_command {process_id, chars?, yield_time_ms?}`; see the module docs.
pub struct InputCommandTool {
    def: ToolDefinitionConfig,
    manager: Arc<CommandSessionManager>,
}

impl InputCommandTool {
    /// Builds the tool over the session's manager.
    pub fn new(def: ToolDefinitionConfig, manager: Arc<CommandSessionManager>) -> Self {
        InputCommandTool { def, manager }
    }
}

/// Factory for [`crate::tools::builtin_factory`].
pub fn input_command_factory(def: ToolDefinitionConfig, services: &ToolServices) -> Arc<dyn Tool> {
    Arc::new(InputCommandTool::new(def, services.commands.clone()))
}

#[async_trait]
impl Tool for InputCommandTool {
    fn definition(&self) -> &ToolDefinitionConfig {
        &self.def
    }

    async fn execute(&self, args: ToolArgs, ctx: ToolContext) -> Result<ToolResult, ToolError> {
        let id = str_arg(&args, "process_id");
        if id.trim().is_empty() {
            return Ok(ToolResult::failed(self.missing_argument_text("process_id")));
        }
        let Some(session) = self.manager.get(id) else {
            return Ok(ToolResult::failed(unknown_id_text(id)));
        };
        let chars = str_arg(&args, "chars");
        let default = if chars.is_empty() {
            DEFAULT_EMPTY_POLL_YIELD_MS
        } else {
            DEFAULT_WRITE_YIELD_MS
        };
        let window = clamp_yield(args.get("yield_time_ms"), default, self.def.timeout_ms);
        if ctx.cancel.is_cancelled() {
            return Ok(ToolResult::aborted());
        }
        // Over a pipe an ETX byte is just data, so Ctrl-C must come alone to mean SIGINT.
        if chars == CTRL_C {
            session.interrupt();
        } else if chars.contains(CTRL_C) {
            return Ok(ToolResult::failed(MIXED_CTRL_C_TEXT));
        } else {
            session.write(chars);
        }
        let end = session.collect(window, &ctx.cancel, &ctx.output).await;
        if end == CollectEnd::Cancelled || ctx.cancel.is_cancelled() {
            // Ends this poll only; the process keeps running.
            return Ok(ToolResult::aborted());
        }
        if end == CollectEnd::Running {
            return Ok(ToolResult::completed_with_note(still_running_note(id)));
        }
        self.manager.remove(id);
        Ok(result_for_exit(session.exit_status().as_ref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yield_clamp_table() {
        // (raw, default, timeout_ms, expected ms)
        let table: Vec<(Option<Value>, f64, i64, u64)> = vec![
            (None, 60_000.0, 120_000, 60_000),
            (Some(json!(1000)), 60_000.0, 120_000, 1000),
            (Some(json!(10)), 60_000.0, 120_000, 250),
            (Some(json!(-5)), 60_000.0, 120_000, 250),
            (Some(json!(500.5)), 60_000.0, 120_000, 500),
            (Some(json!("900")), 60_000.0, 120_000, 60_000),
            (Some(json!(null)), 5_000.0, 130_000, 5_000),
            (Some(json!(200_000)), 60_000.0, 120_000, 119_000),
            (None, 60_000.0, 1_200, 250),
            (None, 60_000.0, 100, 250),
            (Some(json!(1e300)), 60_000.0, 0, 30 * 24 * 3_600_000),
            (Some(json!(1e300)), 60_000.0, -1, 30 * 24 * 3_600_000),
            (None, 250.0, 130_000, 250),
        ];
        for (raw, default, timeout, want) in table {
            let got = clamp_yield(raw.as_ref(), default, timeout);
            assert_eq!(
                got.as_millis(),
                u128::from(want),
                "{raw:?} {default} {timeout}"
            );
        }
    }

    #[test]
    fn exit_results() {
        assert_eq!(
            result_for_exit(Some(&ExitStatus::Code(0))),
            ToolResult::completed()
        );
        assert_eq!(
            result_for_exit(Some(&ExitStatus::Code(3))),
            ToolResult::failed("[exit code: 3]")
        );
        assert_eq!(
            result_for_exit(Some(&ExitStatus::Signal("SIGTERM".into()))),
            ToolResult::failed("[terminated by signal SIGTERM]")
        );
        assert_eq!(
            result_for_exit(None),
            ToolResult::failed("[exit code: unknown]")
        );
    }

    #[test]
    fn texts() {
        assert_eq!(
            MIXED_CTRL_C_TEXT,
            r#"[input_command error: chars mixes U+0003 (Ctrl-C) with other content; send "\u0003" alone to interrupt]"#
        );
        assert_eq!(
            running_note("proc-0a1b2c3d"),
            "[process running with process_id proc-0a1b2c3d; use input_command to send input or poll for output]"
        );
    }
}

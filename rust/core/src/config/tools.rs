//! Tool definitions (SPEC §3): the `ToolDefinitionConfig` shape and the defaults of the six
//! built-in tools, with complete JSON Schemas.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::protocol::ToolSpec;

/// Default per-call timeout in milliseconds (seed spec); `<= 0` disables it.
pub const DEFAULT_TIMEOUT_MS: i64 = 120_000;
/// Default model-visible output cap in characters (seed spec); `<= 0` disables it.
pub const DEFAULT_MAX_OUTPUT_LENGTH: i64 = 16_000;

/// Whether a tool only reads or may also change the workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Permission {
    /// Read-only (auto-approved by the `read-only` mode).
    #[serde(rename = "r")]
    Read,
    /// Read-write.
    #[serde(rename = "rw")]
    ReadWrite,
}

impl Permission {
    /// `r` or `rw`.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Read => "r",
            Permission::ReadWrite => "rw",
        }
    }
}

/// Which class of session model a tool is offered to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ForModel {
    /// Only models that accept images.
    Vision,
    /// Only models that do not.
    TextOnly,
}

fn default_timeout_ms() -> i64 {
    DEFAULT_TIMEOUT_MS
}

fn default_max_output_length() -> i64 {
    DEFAULT_MAX_OUTPUT_LENGTH
}

/// One tool's configuration, as written in `system_config.yaml` under `tools.builtin`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDefinitionConfig {
    /// Tool name; must match a built-in factory to be usable.
    pub name: String,
    /// Description handed to the model.
    pub description: String,
    /// JSON Schema of the arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// `r` or `rw`.
    pub permission: Permission,
    /// Model class filter; absent = every model.
    #[serde(rename = "forModel", default, skip_serializing_if = "Option::is_none")]
    pub for_model: Option<ForModel>,
    /// Per-call timeout in ms; `<= 0` disables it.
    #[serde(rename = "timeoutMs", default = "default_timeout_ms")]
    pub timeout_ms: i64,
    /// Output cap in characters; `<= 0` disables it.
    #[serde(rename = "maxOutputLength", default = "default_max_output_length")]
    pub max_output_length: i64,
}

impl ToolDefinitionConfig {
    /// What the model is shown: name, description, parameters.
    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
        }
    }

    /// Whether the tool is offered to a model with (`true`) or without vision.
    pub fn offered_to(&self, vision: bool) -> bool {
        match self.for_model {
            None => true,
            Some(ForModel::Vision) => vision,
            Some(ForModel::TextOnly) => !vision,
        }
    }
}

fn def(
    name: &str,
    description: &str,
    permission: Permission,
    for_model: Option<ForModel>,
    timeout_ms: i64,
    parameters: Value,
) -> ToolDefinitionConfig {
    ToolDefinitionConfig {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters: Some(parameters),
        permission,
        for_model,
        timeout_ms,
        max_output_length: DEFAULT_MAX_OUTPUT_LENGTH,
    }
}

/// The six built-in tools with their seed defaults.
pub fn default_tool_definitions() -> Vec<ToolDefinitionConfig> {
    let yield_ms = |what: &str| json!({"type": "number", "description": what});
    vec![
        def(
            "exec_command",
            "Run a shell command in the workspace with `bash -lc`, streaming its combined stdout \
             and stderr. Reading, writing and editing files all go through this tool. If the \
             command is still running after yield_time_ms it moves to the background and the \
             result carries a process_id for input_command.",
            Permission::ReadWrite,
            None,
            120_000,
            json!({
                "type": "object",
                "properties": {
                    "cmd": {"type": "string", "description": "The shell command to run."},
                    "workdir": {"type": "string", "description": "Working directory; relative paths resolve against the workspace (default: the workspace root)."},
                    "yield_time_ms": yield_ms("How long to wait in the foreground before moving the command to the background (default 60000, minimum 250)."),
                    "tty": {"type": "boolean", "description": "Run in a pseudo-terminal, for interactive programs such as REPLs and password prompts (default false)."}
                },
                "required": ["cmd"],
                "additionalProperties": false
            }),
        ),
        def(
            "input_command",
            "Drive a background command started by exec_command: write characters to its stdin, \
             send \"\\u0003\" alone to deliver Ctrl-C, or send nothing to poll for new output.",
            Permission::ReadWrite,
            None,
            130_000,
            json!({
                "type": "object",
                "properties": {
                    "process_id": {"type": "string", "description": "The process_id returned by exec_command."},
                    "chars": {"type": "string", "description": "Characters to write to stdin; \"\\u0003\" alone sends Ctrl-C; empty polls for output."},
                    "yield_time_ms": yield_ms("How long to wait for output (default 250 when writing, 5000 for an empty poll).")
                },
                "required": ["process_id"],
                "additionalProperties": false
            }),
        ),
        def(
            "run_subagent",
            "Delegate a self-contained subtask to a child agent working in the same workspace. \
             The prompt must carry all context and say exactly what the final answer should be. \
             If the child is still working after yield_time_ms it moves to the background with a \
             subagent_id for input_subagent.",
            Permission::ReadWrite,
            None,
            600_000,
            json!({
                "type": "object",
                "properties": {
                    "prompt": {"type": "string", "description": "The complete subtask: all context and the exact final output expected."},
                    "agent_id": {"type": "string", "description": "The child agent (default: the current agent)."},
                    "model_id": {"type": "string", "description": "The child's model id; give it together with provider, or omit both to inherit the parent's model."},
                    "provider": {"type": "string", "description": "The provider of model_id; give both or neither."},
                    "yield_time_ms": yield_ms("How long to wait in the foreground (default 300000).")
                },
                "required": ["prompt"],
                "additionalProperties": false
            }),
        ),
        def(
            "input_subagent",
            "Poll a background subagent for progress, or send it a follow-up prompt once it is idle.",
            Permission::ReadWrite,
            None,
            600_000,
            json!({
                "type": "object",
                "properties": {
                    "subagent_id": {"type": "string", "description": "The subagent_id returned by run_subagent."},
                    "prompt": {"type": "string", "description": "A follow-up task, accepted only while the subagent is idle; empty polls."},
                    "yield_time_ms": yield_ms("How long to wait (default 300000 with a prompt, 10000 for an empty poll).")
                },
                "required": ["subagent_id"],
                "additionalProperties": false
            }),
        ),
        def(
            "read_image",
            "Read an image (png, jpeg, gif or webp, at most 5 MB) from an http(s) URL or a \
             workspace path and return it as image content.",
            Permission::Read,
            Some(ForModel::Vision),
            60_000,
            json!({
                "type": "object",
                "properties": {
                    "source": {"type": "string", "description": "An http(s) URL or a file path (relative paths resolve against the workspace)."}
                },
                "required": ["source"],
                "additionalProperties": false
            }),
        ),
        def(
            "describe_image",
            "Have the configured vision model look at an image (png, jpeg, gif or webp, at most \
             5 MB, from an http(s) URL or a workspace path) and answer in text.",
            Permission::Read,
            Some(ForModel::TextOnly),
            90_000,
            json!({
                "type": "object",
                "properties": {
                    "source": {"type": "string", "description": "An http(s) URL or a file path (relative paths resolve against the workspace)."},
                    "prompt": {"type": "string", "description": "What to ask about the image (default: a detailed description)."}
                },
                "required": ["source"],
                "additionalProperties": false
            }),
        ),
    ]
}

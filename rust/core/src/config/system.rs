//! `system_config.yaml` (SPEC §7): the agent's system prompt template, turn and model limits,
//! compaction, reconnect and the tool list. There is no deep merge with the defaults: a
//! section that is present replaces the default section wholesale; `tools.builtin`, once
//! written, is the complete tool list.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::tools::{ToolDefinitionConfig, default_tool_definitions};
use crate::llm::ThinkingLevel;

/// Default system prompt template. `{{NAME}}` placeholders are substituted per session.
pub const DEFAULT_SYSTEM_PROMPT: &str = "\
# Role
You are an agent working on the user's machine through a small set of tools. The shell is \
your universal interface: read, write and edit files with `exec_command`.

# How to work
- Inspect real files and run real commands rather than answering from memory.
- Make the smallest change that solves the request and verify it before you answer.
- When a tool call fails, read the error and adjust; never repeat the same failing input.
- Stop and answer once the request is solved; ask when it is ambiguous.

# System markers
Some user messages carry harness-written `[tag]...[/tag]` blocks, not text to answer:
- `[turn_aborted]`: the previous turn was interrupted; it lists the request, your partial \
output and the tool calls already run. Continue from there without re-running them.
- `[turn_retried]`: the previous attempt failed on its own and this is the automatic retry.

[developer_instructions]
{{AGENTS_MD}}
[/developer_instructions]

# Environment
- Platform: {{PLATFORM}}
- Shell: {{SHELL}}
- Date: {{DATE}}
- Data root: {{PROJECT_DIR}}
- Agent ID: {{AGENT_ID}}
- Workspace (CWD): {{CWD}}
- Provider: {{PROVIDER}}
- Model ID: {{MODEL_ID}}
- Session ID: {{SESSION_ID}}";

/// Default `model.max_tokens`.
pub const DEFAULT_MAX_TOKENS: i64 = 32_000;
/// Default model idle timeout in ms (reset on every streamed event).
pub const DEFAULT_MODEL_TIMEOUT_MS: u64 = 120_000;
/// Default number of reconnects after a failed request (reference engine).
pub const DEFAULT_MAX_RETRIES: u32 = 5;
/// Default base of the reconnect backoff `min(base * 2^(k-1), 30000)` in ms.
pub const DEFAULT_RECONNECT_BASE_MS: u64 = 2_000;
/// Cap of one reconnect wait in ms.
pub const MAX_RECONNECT_DELAY_MS: u64 = 30_000;

fn default_max_turns() -> i64 {
    -1
}

/// `model` section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSettings {
    /// Output cap per request; `<= 0` omits it.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: i64,
    /// Default thinking level of a run.
    #[serde(default)]
    pub thinking_level: ThinkingLevel,
    /// Idle timeout of a streaming request in ms.
    #[serde(rename = "timeoutMs", default = "default_model_timeout")]
    pub timeout_ms: u64,
}

fn default_max_tokens() -> i64 {
    DEFAULT_MAX_TOKENS
}

fn default_model_timeout() -> u64 {
    DEFAULT_MODEL_TIMEOUT_MS
}

impl Default for ModelSettings {
    fn default() -> Self {
        ModelSettings {
            max_tokens: DEFAULT_MAX_TOKENS,
            thinking_level: ThinkingLevel::default(),
            timeout_ms: DEFAULT_MODEL_TIMEOUT_MS,
        }
    }
}

/// `reconnect` section: how failed model requests are retried within a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReconnectSettings {
    /// Retries after the first attempt.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// Backoff base in ms.
    #[serde(default = "default_reconnect_base")]
    pub base_delay_ms: u64,
}

fn default_max_retries() -> u32 {
    DEFAULT_MAX_RETRIES
}

fn default_reconnect_base() -> u64 {
    DEFAULT_RECONNECT_BASE_MS
}

impl Default for ReconnectSettings {
    fn default() -> Self {
        ReconnectSettings {
            max_retries: DEFAULT_MAX_RETRIES,
            base_delay_ms: DEFAULT_RECONNECT_BASE_MS,
        }
    }
}

impl ReconnectSettings {
    /// Wait before retry `k` (1-based): `min(base * 2^(k-1), 30000)` ms.
    pub fn delay_ms(&self, k: u32) -> u64 {
        let factor = 1u64.checked_shl(k.saturating_sub(1)).unwrap_or(u64::MAX);
        self.base_delay_ms
            .saturating_mul(factor)
            .min(MAX_RECONNECT_DELAY_MS)
    }
}

/// `tools` section.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsSection {
    /// The complete tool list; absent = the six defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<Vec<ToolDefinitionConfig>>,
    /// MCP server configs (accepted and kept; not wired).
    #[serde(rename = "mcpServers", default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<serde_json::Value>,
}

/// The parsed `system_config.yaml`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SystemConfig {
    /// System prompt template with `{{NAME}}` placeholders.
    pub system_prompt: String,
    /// Max model requests per task; `<= 0` = unlimited.
    #[serde(default = "default_max_turns")]
    pub max_turns: i64,
    /// Model request settings.
    #[serde(default)]
    pub model: ModelSettings,
    /// Reconnect policy.
    #[serde(default)]
    pub reconnect: ReconnectSettings,
    /// Compaction settings (accepted and kept; compaction is not part of the core loop yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<serde_json::Value>,
    /// Tool list.
    #[serde(default)]
    pub tools: ToolsSection,
}

impl Default for SystemConfig {
    fn default() -> Self {
        SystemConfig {
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_owned(),
            max_turns: default_max_turns(),
            model: ModelSettings::default(),
            reconnect: ReconnectSettings::default(),
            compaction: None,
            tools: ToolsSection::default(),
        }
    }
}

impl SystemConfig {
    /// Parses YAML text; `origin` names the source in errors.
    pub fn from_yaml(text: &str, origin: &Path) -> Result<Self, ConfigError> {
        let cfg: SystemConfig = serde_saphyr::from_str(text).map_err(|e| ConfigError::Parse {
            path: origin.to_path_buf(),
            message: e.to_string(),
        })?;
        cfg.validate(origin)?;
        Ok(cfg)
    }

    /// Reads and parses a file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_yaml(&text, path)
    }

    /// Serializes to YAML (used to write the defaults of a new agent).
    pub fn to_yaml(&self) -> Result<String, ConfigError> {
        serde_saphyr::to_string(self).map_err(|e| ConfigError::Serialize {
            message: e.to_string(),
        })
    }

    fn validate(&self, origin: &Path) -> Result<(), ConfigError> {
        if self.system_prompt.trim().is_empty() {
            return Err(ConfigError::Invalid {
                path: origin.to_path_buf(),
                message: "system_prompt must not be empty".into(),
            });
        }
        if let Some(tools) = &self.tools.builtin {
            let mut seen = std::collections::HashSet::new();
            for t in tools {
                if !seen.insert(t.name.as_str()) {
                    return Err(ConfigError::Invalid {
                        path: origin.to_path_buf(),
                        message: format!("tools.builtin lists \"{}\" twice", t.name),
                    });
                }
                if let Some(schema) = &t.parameters {
                    if let Err(e) = jsonschema::validator_for(schema) {
                        return Err(ConfigError::Invalid {
                            path: origin.to_path_buf(),
                            message: format!(
                                "tools.builtin \"{}\": invalid parameters schema: {e}",
                                t.name
                            ),
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// The effective tool list: `tools.builtin` when written (wholesale replacement), else the
    /// six defaults.
    pub fn tool_definitions(&self) -> Vec<ToolDefinitionConfig> {
        self.tools
            .builtin
            .clone()
            .unwrap_or_else(default_tool_definitions)
    }
}

/// Substitutes `{{NAME}}` placeholders; unknown placeholders are left as written.
pub fn render_template(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = template.to_owned();
    for (name, value) in values {
        out = out.replace(&format!("{{{{{name}}}}}"), value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tools::Permission;

    fn parse(text: &str) -> Result<SystemConfig, ConfigError> {
        SystemConfig::from_yaml(text, Path::new("system_config.yaml"))
    }

    #[test]
    fn absent_tools_section_keeps_the_six_defaults() {
        let cfg = parse("system_prompt: hi\n").unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<String> = cfg.tool_definitions().into_iter().map(|t| t.name).collect();
        assert_eq!(
            names,
            [
                "exec_command",
                "input_command",
                "run_subagent",
                "input_subagent",
                "read_image",
                "describe_image"
            ]
        );
        assert_eq!(cfg.max_turns, -1);
        assert_eq!(cfg.model, ModelSettings::default());
    }

    #[test]
    fn builtin_replaces_the_defaults_wholesale() {
        let cfg = parse(
            "system_prompt: hi\ntools:\n  builtin:\n    - name: exec_command\n      description: Run.\n      permission: rw\n      timeoutMs: 5000\n      parameters:\n        type: object\n        properties:\n          cmd: {type: string}\n        required: [cmd]\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let tools = cfg.tool_definitions();
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].name, "exec_command");
        assert_eq!(tools[0].timeout_ms, 5000);
        assert_eq!(tools[0].max_output_length, 16_000);
        assert_eq!(tools[0].permission, Permission::ReadWrite);
    }

    #[test]
    fn bad_configs_name_the_problem() {
        let cases = [
            ("system_prompt: ''\n", "system_prompt must not be empty"),
            ("max_turns: 3\n", "system_prompt"),
            (
                "system_prompt: x\ntools:\n  builtin:\n    - name: a\n      description: d\n      permission: rwx\n",
                "rwx",
            ),
            (
                "system_prompt: x\ntools:\n  builtin:\n    - {name: a, description: d, permission: r}\n    - {name: a, description: d, permission: r}\n",
                "lists \"a\" twice",
            ),
            (
                "system_prompt: x\ntools:\n  builtin:\n    - {name: a, description: d, permission: r, parameters: {type: 12}}\n",
                "invalid parameters schema",
            ),
        ];
        for (text, needle) in cases {
            let err = parse(text).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains(needle), "{text:?} -> {err:?}");
            assert!(err.contains("system_config.yaml"), "{err}");
        }
    }

    #[test]
    fn defaults_round_trip_through_yaml() {
        let cfg = SystemConfig::default();
        let text = cfg.to_yaml().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(parse(&text).unwrap_or_else(|e| panic!("{e}")), cfg);
    }

    #[test]
    fn reconnect_ladder() {
        let r = ReconnectSettings::default();
        let got: Vec<u64> = (1..=6).map(|k| r.delay_ms(k)).collect();
        assert_eq!(got, [2000, 4000, 8000, 16000, 30000, 30000]);
        let fast = ReconnectSettings {
            max_retries: 5,
            base_delay_ms: 1,
        };
        assert_eq!(fast.delay_ms(3), 4);
        assert_eq!(fast.delay_ms(200), 30_000);
    }

    #[test]
    fn templates_substitute_known_placeholders() {
        assert_eq!(
            render_template("a {{X}} b {{Y}} {{Z}}", &[("X", "1"), ("Y", "2")]),
            "a 1 b 2 {{Z}}"
        );
    }
}

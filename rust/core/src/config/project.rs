//! `.project_config.toml` (SPEC §7): the models a project can use, the default model and the
//! vision model. Written with mode 0600 because it may hold API keys.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// The wire protocol a model speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientType {
    /// OpenAI Chat Completions (`<base_url>/chat/completions`, base URL includes `/v1`).
    #[default]
    #[serde(rename = "openai-chat")]
    OpenAiChat,
    /// Anthropic Messages (`<base_url>/v1/messages`, base URL is the host).
    #[serde(rename = "anthropic-messages", alias = "ant-messages")]
    AnthropicMessages,
}

impl ClientType {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientType::OpenAiChat => "openai-chat",
            ClientType::AnthropicMessages => "anthropic-messages",
        }
    }
}

impl std::str::FromStr for ClientType {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "openai-chat" => Ok(ClientType::OpenAiChat),
            "anthropic-messages" | "ant-messages" => Ok(ClientType::AnthropicMessages),
            other => Err(ConfigError::UnknownClientType(other.to_owned())),
        }
    }
}

fn default_true() -> bool {
    true
}

/// One `[[models]]` entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// Provider group, e.g. `openai`, `anthropic`, `local`.
    pub provider: String,
    /// Upstream model id.
    pub model_id: String,
    /// Context window in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// Wire protocol.
    #[serde(default)]
    pub client_type: ClientType,
    /// Whether the model accepts images (selects read_image vs describe_image).
    #[serde(default = "default_true")]
    pub vision: bool,
    /// Output cap; `<= 0` omits it; absent = the agent's `model.max_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<i64>,
    /// API key; absent = the provider's environment variable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// Base URL; absent = `<PROVIDER>_BASE_URL` or the provider's public endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
}

/// A model reference: the (provider, model_id) pair.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelRef {
    /// Provider group.
    pub provider: String,
    /// Model id.
    pub model_id: String,
}

/// The parsed `.project_config.toml`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProjectConfig {
    /// Model used when a session names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<ModelRef>,
    /// Model that answers `describe_image`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vision_model: Option<ModelRef>,
    /// Known models.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<ModelEntry>,
    /// Sections this version does not interpret, kept on rewrite.
    #[serde(flatten)]
    pub other: toml::Table,
}

impl ModelEntry {
    /// A minimal entry with defaults.
    pub fn new(provider: impl Into<String>, model_id: impl Into<String>) -> Self {
        ModelEntry {
            provider: provider.into(),
            model_id: model_id.into(),
            context_window: None,
            client_type: ClientType::default(),
            vision: true,
            max_tokens: None,
            api_key: None,
            base_url: None,
        }
    }

    /// The environment variable prefix of the provider: `OPENAI`, `ANTHROPIC`, `MY_LAB`.
    pub fn env_prefix(&self) -> String {
        self.provider
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect()
    }

    /// The key: the entry's own, else `<PROVIDER>_API_KEY`, else the client type's usual variable
    /// (`OPENAI_API_KEY` / `ANTHROPIC_API_KEY`).
    pub fn resolved_api_key(&self) -> Option<String> {
        let from_env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        self.api_key
            .clone()
            .filter(|k| !k.is_empty())
            .or_else(|| from_env(&format!("{}_API_KEY", self.env_prefix())))
            .or_else(|| match self.client_type {
                ClientType::OpenAiChat => from_env("OPENAI_API_KEY"),
                ClientType::AnthropicMessages => from_env("ANTHROPIC_API_KEY"),
            })
    }

    /// The base URL: the entry's own, else `<PROVIDER>_BASE_URL`, else the public endpoint of
    /// the client type. OpenAI-style URLs include the version (`.../v1`); Anthropic's are the
    /// host.
    pub fn resolved_base_url(&self) -> String {
        let from_env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        self.base_url
            .clone()
            .filter(|u| !u.is_empty())
            .or_else(|| from_env(&format!("{}_BASE_URL", self.env_prefix())))
            .unwrap_or_else(|| match self.client_type {
                ClientType::OpenAiChat => "https://api.openai.com/v1".to_owned(),
                ClientType::AnthropicMessages => "https://api.anthropic.com".to_owned(),
            })
    }
}

impl ProjectConfig {
    /// Parses TOML text.
    pub fn from_toml(text: &str, origin: &Path) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: origin.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// Reads the file; a missing file is an empty config.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::from_toml(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(source) => Err(ConfigError::Io {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Writes the file with mode 0600 (it may hold keys), atomically via a temp file.
    pub fn save(&self, path: &Path) -> Result<(), ConfigError> {
        let text = toml::to_string_pretty(self).map_err(|e| ConfigError::Serialize {
            message: e.to_string(),
        })?;
        super::write_private_file(path, text.as_bytes())
    }

    /// Adds `entry`, replacing an entry with the same (provider, model_id); with
    /// `set_default` it also becomes the default model. Returns whether an entry was replaced.
    pub fn upsert_model(&mut self, entry: ModelEntry, set_default: bool) -> bool {
        if set_default {
            self.default_model = Some(ModelRef {
                provider: entry.provider.clone(),
                model_id: entry.model_id.clone(),
            });
        }
        match self
            .models
            .iter_mut()
            .find(|m| m.provider == entry.provider && m.model_id == entry.model_id)
        {
            Some(existing) => {
                *existing = entry;
                true
            }
            None => {
                self.models.push(entry);
                false
            }
        }
    }

    /// Removes the entry (provider, model_id) and any default/vision reference to it.
    /// Returns whether it existed.
    pub fn remove_model(&mut self, provider: &str, model_id: &str) -> bool {
        let before = self.models.len();
        self.models
            .retain(|m| !(m.provider == provider && m.model_id == model_id));
        let is_it = |r: &Option<ModelRef>| {
            r.as_ref()
                .is_some_and(|r| r.provider == provider && r.model_id == model_id)
        };
        if is_it(&self.default_model) {
            self.default_model = None;
        }
        if is_it(&self.vision_model) {
            self.vision_model = None;
        }
        self.models.len() != before
    }

    /// Finds an entry by reference.
    pub fn find(&self, provider: &str, model_id: &str) -> Option<&ModelEntry> {
        self.models
            .iter()
            .find(|m| m.provider == provider && m.model_id == model_id)
    }

    /// Resolves a reference: both halves, or neither (the default model). Half a pair is an
    /// error, as is a reference to a model the project does not list.
    pub fn resolve(
        &self,
        provider: Option<&str>,
        model_id: Option<&str>,
    ) -> Result<ModelEntry, ConfigError> {
        let (provider, model_id) = match (provider, model_id) {
            (Some(p), Some(m)) => (p.to_owned(), m.to_owned()),
            (None, None) => match &self.default_model {
                Some(r) => (r.provider.clone(), r.model_id.clone()),
                None => match self.models.first() {
                    Some(m) => (m.provider.clone(), m.model_id.clone()),
                    None => return Err(ConfigError::NoModel),
                },
            },
            _ => return Err(ConfigError::HalfModelRef),
        };
        self.find(&provider, &model_id)
            .cloned()
            .ok_or(ConfigError::UnknownModel { provider, model_id })
    }
}

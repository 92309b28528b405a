//! `.project_config.toml` (SPEC §7): the models a project can use, the default model and the
//! vision model. Written with mode 0600 because it may hold API keys.

use std::path::{Path, PathBuf};

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

/// Names the model id of the environment's model.
pub const ENV_MODEL_ID: &str = "PENGUIN_MODEL_ID";
/// Names the provider of the environment's model (default `openai`).
pub const ENV_PROVIDER: &str = "PENGUIN_PROVIDER";
/// Names the client type of the environment's model (default `openai-chat`).
pub const ENV_CLIENT_TYPE: &str = "PENGUIN_CLIENT_TYPE";

/// The model the environment names, for running without configuration: `PENGUIN_MODEL_ID`
/// (required), `PENGUIN_PROVIDER` (default `openai`) and `PENGUIN_CLIENT_TYPE` (default
/// `openai-chat`); base URL and key come from the provider's usual variables
/// (`<PROVIDER>_BASE_URL`, `<PROVIDER>_API_KEY`, then `OPENAI_*` / `ANTHROPIC_API_KEY`).
/// `None` when `PENGUIN_MODEL_ID` is unset or empty.
pub fn model_from_env() -> Result<Option<ModelEntry>, ConfigError> {
    let var = |name: &str| {
        std::env::var(name)
            .ok()
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let Some(model_id) = var(ENV_MODEL_ID) else {
        return Ok(None);
    };
    let mut entry = ModelEntry::new(
        var(ENV_PROVIDER).unwrap_or_else(|| "openai".to_owned()),
        model_id,
    );
    if let Some(kind) = var(ENV_CLIENT_TYPE) {
        entry.client_type = kind.parse()?;
    }
    Ok(Some(entry))
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

    /// The environment variables that may hold this entry's key, in lookup order:
    /// `<PROVIDER>_API_KEY`, then the client type's usual variable (`OPENAI_API_KEY` /
    /// `ANTHROPIC_API_KEY`) when it differs.
    pub fn key_env_vars(&self) -> Vec<String> {
        let own = format!("{}_API_KEY", self.env_prefix());
        let usual = match self.client_type {
            ClientType::OpenAiChat => "OPENAI_API_KEY",
            ClientType::AnthropicMessages => "ANTHROPIC_API_KEY",
        };
        if own == usual {
            vec![own]
        } else {
            vec![own, usual.to_owned()]
        }
    }

    /// Where the key comes from (never the key itself): the entry, the first set variable of
    /// [`ModelEntry::key_env_vars`], or nowhere.
    pub fn api_key_source(&self) -> KeySource {
        if self.api_key.as_deref().is_some_and(|k| !k.is_empty()) {
            return KeySource::Config;
        }
        let vars = self.key_env_vars();
        match vars.iter().find(|v| env_value(v).is_some()) {
            Some(var) => KeySource::Env { var: var.clone() },
            None => KeySource::Missing { looked_at: vars },
        }
    }

    /// The key: the entry's own, else `<PROVIDER>_API_KEY`, else the client type's usual variable
    /// (`OPENAI_API_KEY` / `ANTHROPIC_API_KEY`).
    pub fn resolved_api_key(&self) -> Option<String> {
        match self.api_key_source() {
            KeySource::Config => self.api_key.clone(),
            KeySource::Env { var } => env_value(&var),
            KeySource::Missing { .. } => None,
        }
    }

    /// Where the base URL comes from: the entry, `<PROVIDER>_BASE_URL`, or the client type's
    /// public endpoint.
    pub fn base_url_source(&self) -> BaseUrlSource {
        if self.base_url.as_deref().is_some_and(|u| !u.is_empty()) {
            return BaseUrlSource::Config;
        }
        let var = format!("{}_BASE_URL", self.env_prefix());
        if env_value(&var).is_some() {
            BaseUrlSource::Env { var }
        } else {
            BaseUrlSource::Default
        }
    }

    /// The base URL: the entry's own, else `<PROVIDER>_BASE_URL`, else the public endpoint of
    /// the client type. OpenAI-style URLs include the version (`.../v1`); Anthropic's are the
    /// host.
    pub fn resolved_base_url(&self) -> String {
        let default = || match self.client_type {
            ClientType::OpenAiChat => "https://api.openai.com/v1".to_owned(),
            ClientType::AnthropicMessages => "https://api.anthropic.com".to_owned(),
        };
        match self.base_url_source() {
            BaseUrlSource::Config => self.base_url.clone().unwrap_or_else(default),
            BaseUrlSource::Env { var } => env_value(&var).unwrap_or_else(default),
            BaseUrlSource::Default => default(),
        }
    }

    /// Checks what a person may have mistyped: a provider made of letters, digits, `-`, `_`
    /// and `.`; a non-blank model id; an `http(s)://` base URL; a positive context window.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |message: String| Err(ConfigError::InvalidModel(message));
        let provider_ok = !self.provider.is_empty()
            && self
                .provider
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !provider_ok {
            return bad(format!(
                "provider \"{}\" must be letters, digits, '-', '_' or '.'",
                self.provider
            ));
        }
        if self.model_id.trim().is_empty() || self.model_id.trim() != self.model_id {
            return bad(format!(
                "model id \"{}\" must be non-empty without surrounding spaces",
                self.model_id
            ));
        }
        if let Some(url) = &self.base_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return bad(format!(
                    "base URL \"{url}\" must start with http:// or https://"
                ));
            }
        }
        if self.context_window == Some(0) {
            return bad("context window must be a positive number of tokens".into());
        }
        Ok(())
    }
}

fn env_value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Where a model's API key comes from. Listing models shows this, never the key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KeySource {
    /// The entry's own `api_key` (stored in the 0600 project file).
    Config,
    /// An environment variable that is set.
    Env {
        /// Its name.
        var: String,
    },
    /// No key anywhere (fine for local servers that need none).
    Missing {
        /// The variables looked at, in order.
        looked_at: Vec<String>,
    },
}

/// Where a model's base URL comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BaseUrlSource {
    /// The entry's own `base_url`.
    Config,
    /// `<PROVIDER>_BASE_URL`.
    Env {
        /// Its name.
        var: String,
    },
    /// The public endpoint of the client type.
    Default,
}

/// One configured model as `penguin config model list` shows it: everything but the key.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelSummary {
    /// Provider group.
    pub provider: String,
    /// Model id.
    pub model_id: String,
    /// Wire protocol name.
    pub client_type: &'static str,
    /// The base URL requests go to.
    pub base_url: String,
    /// Where [`ModelSummary::base_url`] comes from.
    pub base_url_source: BaseUrlSource,
    /// Where the key comes from.
    pub api_key: KeySource,
    /// Context window in tokens, if configured.
    pub context_window: Option<u64>,
    /// Output cap, if configured.
    pub max_tokens: Option<i64>,
    /// Whether the model accepts images.
    pub vision: bool,
    /// Whether sessions that name no model use this one.
    pub is_default: bool,
    /// Whether this is the project's `vision_model` (the describer of `describe_image`).
    pub is_vision_model: bool,
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
    /// error, as is a reference to a model the project does not list. The model named by the
    /// environment ([`model_from_env`]) counts as one more entry, and is the default of a
    /// project that lists none, so a fresh machine can run without any config file.
    pub fn resolve(
        &self,
        provider: Option<&str>,
        model_id: Option<&str>,
    ) -> Result<ModelEntry, ConfigError> {
        let from_env = model_from_env()?;
        let (provider, model_id) = match (provider, model_id) {
            (Some(p), Some(m)) => (p.to_owned(), m.to_owned()),
            (None, None) => match &self.default_model {
                Some(r) => (r.provider.clone(), r.model_id.clone()),
                None => match (self.models.first(), &from_env) {
                    (Some(m), _) => (m.provider.clone(), m.model_id.clone()),
                    (None, Some(env)) => return Ok(env.clone()),
                    (None, None) => return Err(ConfigError::NoModel),
                },
            },
            _ => return Err(ConfigError::HalfModelRef),
        };
        if let Some(entry) = self.find(&provider, &model_id) {
            return Ok(entry.clone());
        }
        match from_env {
            Some(env) if env.provider == provider && env.model_id == model_id => Ok(env),
            _ => Err(ConfigError::UnknownModel { provider, model_id }),
        }
    }
    /// The reference sessions that name no model use: `default_model`, else the first entry.
    pub fn default_ref(&self) -> Option<ModelRef> {
        self.default_model.clone().or_else(|| {
            self.models.first().map(|m| ModelRef {
                provider: m.provider.clone(),
                model_id: m.model_id.clone(),
            })
        })
    }

    /// Makes (provider, model_id) the project's `vision_model`. It must be configured and
    /// accept images.
    pub fn set_vision_model(&mut self, provider: &str, model_id: &str) -> Result<(), ConfigError> {
        let entry = self
            .find(provider, model_id)
            .ok_or_else(|| ConfigError::UnknownModel {
                provider: provider.to_owned(),
                model_id: model_id.to_owned(),
            })?;
        if !entry.vision {
            return Err(ConfigError::InvalidModel(format!(
                "{provider}/{model_id} is configured without vision; the vision model must accept images"
            )));
        }
        self.vision_model = Some(ModelRef {
            provider: provider.to_owned(),
            model_id: model_id.to_owned(),
        });
        Ok(())
    }

    /// Every entry as [`ModelSummary`], in file order.
    pub fn summaries(&self) -> Vec<ModelSummary> {
        let default = self.default_ref();
        let is = |r: &Option<ModelRef>, m: &ModelEntry| {
            r.as_ref()
                .is_some_and(|r| r.provider == m.provider && r.model_id == m.model_id)
        };
        self.models
            .iter()
            .map(|m| ModelSummary {
                provider: m.provider.clone(),
                model_id: m.model_id.clone(),
                client_type: m.client_type.as_str(),
                base_url: m.resolved_base_url(),
                base_url_source: m.base_url_source(),
                api_key: m.api_key_source(),
                context_window: m.context_window,
                max_tokens: m.max_tokens,
                vision: m.vision,
                is_default: is(&default, m),
                is_vision_model: is(&self.vision_model, m),
            })
            .collect()
    }
}

/// A project's `.project_config.toml` on disk. Every change loads the file, edits it and saves
/// it whole (mode 0600, atomically), so edits by `penguin config` never leave a half-written
/// file; comments in a hand-edited file are not kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectFile {
    path: PathBuf,
}

impl ProjectFile {
    /// The file at `path` (it need not exist yet).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        ProjectFile { path: path.into() }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The current contents; a missing file is an empty config.
    pub fn load(&self) -> Result<ProjectConfig, ConfigError> {
        ProjectConfig::load(&self.path)
    }

    fn edit<T>(
        &self,
        change: impl FnOnce(&mut ProjectConfig) -> Result<T, ConfigError>,
    ) -> Result<T, ConfigError> {
        let mut config = self.load()?;
        let out = change(&mut config)?;
        config.save(&self.path)?;
        Ok(out)
    }

    /// Adds or replaces a model (see [`ProjectConfig::upsert_model`]) after validating it.
    /// Returns whether an entry was replaced.
    pub fn add_model(&self, entry: ModelEntry, set_default: bool) -> Result<bool, ConfigError> {
        entry.validate()?;
        self.edit(|c| Ok(c.upsert_model(entry, set_default)))
    }

    /// Removes a model and the default/vision references to it; unknown models are an error.
    pub fn remove_model(&self, provider: &str, model_id: &str) -> Result<(), ConfigError> {
        self.edit(|c| {
            if c.remove_model(provider, model_id) {
                Ok(())
            } else {
                Err(ConfigError::UnknownModel {
                    provider: provider.to_owned(),
                    model_id: model_id.to_owned(),
                })
            }
        })
    }

    /// Sets the project's vision model (see [`ProjectConfig::set_vision_model`]).
    pub fn set_vision_model(&self, provider: &str, model_id: &str) -> Result<(), ConfigError> {
        self.edit(|c| c.set_vision_model(provider, model_id))
    }

    /// The configured models without their keys.
    pub fn models(&self) -> Result<Vec<ModelSummary>, ConfigError> {
        Ok(self.load()?.summaries())
    }
}

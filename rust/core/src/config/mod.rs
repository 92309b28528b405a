//! Configuration: tool definitions, the agent's `system_config.yaml` and the project's
//! `.project_config.toml`, with typed errors that name the file and the problem.

pub mod project;
pub mod system;
pub mod tools;

use std::path::{Path, PathBuf};

pub use project::{
    BaseUrlSource, ClientType, KeySource, ModelEntry, ModelRef, ModelSummary, ProjectConfig,
    ProjectFile,
};
pub use system::{ModelSettings, ReconnectSettings, SystemConfig, render_template};
pub use tools::{
    DEFAULT_MAX_OUTPUT_LENGTH, DEFAULT_TIMEOUT_MS, ForModel, Permission, ToolDefinitionConfig,
    default_tool_definitions,
};

/// Errors of the configuration layer.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file is not valid YAML/TOML for its schema.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Parser message with position.
        message: String,
    },
    /// A file parsed but its content is not usable.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Serialization failed (should not happen for these types).
    #[error("could not serialize configuration: {message}")]
    Serialize {
        /// Serializer message.
        message: String,
    },
    /// Only one half of a (provider, model_id) pair was given.
    #[error(
        "a model reference needs both provider and model_id (or neither, for the default model)"
    )]
    HalfModelRef,
    /// No model is configured at all.
    #[error(
        "no model is configured: add one with `penguin config model add`, pass Model(...), or set PENGUIN_MODEL_ID"
    )]
    NoModel,
    /// The reference names a model the project does not list.
    #[error("model {provider}/{model_id} is not configured in this project")]
    UnknownModel {
        /// Provider half.
        provider: String,
        /// Model half.
        model_id: String,
    },
    /// A model entry has a value that cannot work (empty id, bad URL, ...).
    #[error("invalid model entry: {0}")]
    InvalidModel(String),
    /// A client type name is not one of the supported protocols.
    #[error("unknown client type \"{0}\" (expected openai-chat or anthropic-messages)")]
    UnknownClientType(String),
    /// An id does not match `^[A-Za-z0-9_-]+$`.
    #[error("invalid {kind} \"{value}\": use letters, digits, '_' and '-' only")]
    InvalidId {
        /// Which id.
        kind: &'static str,
        /// The value given.
        value: String,
    },
}

/// Reads an agent's `.vault.toml`: `NAME = "value"` pairs that become environment variables
/// of its shell commands (values never reach the model). A missing file is an empty vault; a
/// value that is not a string is an error naming the key.
pub fn load_vault(path: &Path) -> Result<Vec<(String, String)>, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(ConfigError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let table: toml::Table = toml::from_str(&text).map_err(|e| ConfigError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    table
        .into_iter()
        .map(|(k, v)| match v {
            toml::Value::String(s) => Ok((k, s)),
            other => Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                message: format!(
                    "vault entry \"{k}\" must be a string, not {}",
                    other.type_str()
                ),
            }),
        })
        .collect()
}

/// Checks a project/agent/session id against `^[A-Za-z0-9_-]+$`.
pub fn validate_id(kind: &'static str, value: &str) -> Result<(), ConfigError> {
    if !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        Ok(())
    } else {
        Err(ConfigError::InvalidId {
            kind,
            value: value.to_owned(),
        })
    }
}

/// Writes `bytes` to `path` with mode 0600, atomically (temp file + rename).
pub fn write_private_file(path: &Path, bytes: &[u8]) -> Result<(), ConfigError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vaults_hold_strings_only() {
        let dir = std::env::temp_dir().join(format!("ph-vault-{}", rand::random::<u32>()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(".vault.toml");
        assert_eq!(load_vault(&path).unwrap(), vec![]);
        std::fs::write(&path, "API_TOKEN = \"s3cret\"\nOTHER = \"x\"\n").unwrap();
        assert_eq!(
            load_vault(&path).unwrap(),
            vec![
                ("API_TOKEN".to_owned(), "s3cret".to_owned()),
                ("OTHER".to_owned(), "x".to_owned())
            ]
        );
        std::fs::write(&path, "PORT = 8080\n").unwrap();
        let err = load_vault(&path)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("vault entry \"PORT\" must be a string, not integer"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn ids_are_validated() {
        for ok in ["default_agent", "a-1", "X"] {
            assert!(validate_id("agent id", ok).is_ok(), "{ok}");
        }
        for bad in ["", "a b", "../x", "é"] {
            let err = validate_id("agent id", bad)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains("invalid agent id"), "{bad}: {err}");
        }
    }

    #[test]
    fn project_config_round_trips_and_is_private() {
        let dir = std::env::temp_dir().join(format!("ph-cfg-{}", rand::random::<u32>()));
        let path = dir.join(".project_config.toml");
        let mut cfg = ProjectConfig::default();
        let mut m = ModelEntry::new("local", "qwen");
        m.base_url = Some("http://127.0.0.1:8000/v1".into());
        m.vision = false;
        cfg.models.push(m);
        cfg.default_model = Some(ModelRef {
            provider: "local".into(),
            model_id: "qwen".into(),
        });
        cfg.save(&path).unwrap_or_else(|e| panic!("{e}"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0);
        assert_eq!(mode, 0o600);
        let back = ProjectConfig::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, cfg);
        assert_eq!(
            back.resolve(None, None).map(|m| m.model_id).ok(),
            Some("qwen".into())
        );
        assert!(matches!(
            back.resolve(Some("local"), None),
            Err(ConfigError::HalfModelRef)
        ));
        assert!(matches!(
            back.resolve(Some("x"), Some("y")),
            Err(ConfigError::UnknownModel { .. })
        ));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn models_are_added_replaced_and_removed_with_their_references() {
        let mut cfg = ProjectConfig::default();
        assert!(!cfg.upsert_model(ModelEntry::new("a", "1"), false));
        assert!(!cfg.upsert_model(ModelEntry::new("b", "2"), true));
        let mut replacement = ModelEntry::new("a", "1");
        replacement.context_window = Some(8192);
        assert!(cfg.upsert_model(replacement, false));
        assert_eq!(cfg.models.len(), 2);
        assert_eq!(cfg.models[0].context_window, Some(8192));
        assert_eq!(
            cfg.default_model,
            Some(ModelRef {
                provider: "b".into(),
                model_id: "2".into()
            })
        );
        cfg.vision_model = Some(ModelRef {
            provider: "b".into(),
            model_id: "2".into(),
        });
        assert!(cfg.remove_model("b", "2"));
        assert!(!cfg.remove_model("b", "2"));
        assert_eq!(
            (cfg.default_model.clone(), cfg.vision_model.clone()),
            (None, None)
        );
        assert_eq!(cfg.models.len(), 1);
    }

    #[test]
    fn key_and_url_sources_never_carry_the_key() {
        let mut m = ModelEntry::new("my.lab-1", "m");
        assert_eq!(
            m.key_env_vars(),
            ["MY_LAB_1_API_KEY".to_owned(), "OPENAI_API_KEY".to_owned()]
        );
        m.client_type = ClientType::AnthropicMessages;
        m.provider = "anthropic".into();
        assert_eq!(m.key_env_vars(), ["ANTHROPIC_API_KEY".to_owned()]);
        m.api_key = Some("sk-secret".into());
        m.base_url = Some("http://127.0.0.1:9/".into());
        assert_eq!(m.api_key_source(), KeySource::Config);
        assert_eq!(m.base_url_source(), BaseUrlSource::Config);
        let mut cfg = ProjectConfig::default();
        cfg.upsert_model(m, false);
        let shown = serde_json::to_value(cfg.summaries()).unwrap_or_default();
        assert_eq!(
            shown,
            serde_json::json!([{
                "provider": "anthropic", "model_id": "m", "client_type": "anthropic-messages",
                "base_url": "http://127.0.0.1:9/", "base_url_source": {"kind": "config"},
                "api_key": {"kind": "config"}, "context_window": null, "max_tokens": null,
                "vision": true, "is_default": true, "is_vision_model": false
            }])
        );
        assert!(!shown.to_string().contains("sk-secret"));
    }

    #[test]
    fn model_entries_are_validated() {
        type Row = (
            &'static str,
            &'static str,
            Option<&'static str>,
            Option<u64>,
            Option<&'static str>,
        );
        let table: [Row; 6] = [
            (
                "local",
                "qwen3:8b",
                Some("http://127.0.0.1:11434/v1"),
                Some(8192),
                None,
            ),
            (
                "",
                "m",
                None,
                None,
                Some("provider \"\" must be letters, digits, '-', '_' or '.'"),
            ),
            (
                "my lab",
                "m",
                None,
                None,
                Some("provider \"my lab\" must be letters, digits, '-', '_' or '.'"),
            ),
            (
                "p",
                " m",
                None,
                None,
                Some("model id \" m\" must be non-empty without surrounding spaces"),
            ),
            (
                "p",
                "m",
                Some("127.0.0.1:8000"),
                None,
                Some("base URL \"127.0.0.1:8000\" must start with http:// or https://"),
            ),
            (
                "p",
                "m",
                None,
                Some(0),
                Some("context window must be a positive number of tokens"),
            ),
        ];
        for (provider, model_id, url, window, err) in table {
            let mut m = ModelEntry::new(provider, model_id);
            m.base_url = url.map(str::to_owned);
            m.context_window = window;
            assert_eq!(
                m.validate().err().map(|e| e.to_string()),
                err.map(|e| format!("invalid model entry: {e}")),
                "{provider}/{model_id}"
            );
        }
    }

    #[test]
    fn project_file_edits_keep_the_file_private_and_check_references() {
        let dir = std::env::temp_dir().join(format!("ph-pf-{}", rand::random::<u32>()));
        let file = ProjectFile::new(dir.join("p").join(".project_config.toml"));
        assert_eq!(file.models().map(|m| m.len()).ok(), Some(0));
        assert!(matches!(
            file.remove_model("a", "1"),
            Err(ConfigError::UnknownModel { .. })
        ));
        let mut text_only = ModelEntry::new("a", "1");
        text_only.vision = false;
        assert_eq!(file.add_model(text_only, false).ok(), Some(false));
        assert_eq!(
            file.add_model(ModelEntry::new("b", "2"), true).ok(),
            Some(false)
        );
        assert!(file.add_model(ModelEntry::new("", "x"), false).is_err());
        assert!(matches!(
            file.set_vision_model("a", "1"),
            Err(ConfigError::InvalidModel(_))
        ));
        assert!(matches!(
            file.set_vision_model("c", "3"),
            Err(ConfigError::UnknownModel { .. })
        ));
        assert!(file.set_vision_model("b", "2").is_ok());
        let flags: Vec<(String, bool, bool)> = file
            .models()
            .unwrap_or_default()
            .into_iter()
            .map(|m| (m.model_id, m.is_default, m.is_vision_model))
            .collect();
        assert_eq!(
            flags,
            [("1".to_owned(), false, false), ("2".to_owned(), true, true)]
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(file.path())
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0);
        assert_eq!(mode, 0o600);
        assert!(file.remove_model("b", "2").is_ok());
        let cfg = file.load().unwrap_or_default();
        assert_eq!((cfg.default_model, cfg.vision_model), (None, None));
        assert_eq!(cfg.models.len(), 1);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn anthropic_alias_and_unknown_client_type() {
        let cfg = ProjectConfig::from_toml(
            "[[models]]\nprovider = \"anthropic\"\nmodel_id = \"c\"\nclient_type = \"ant-messages\"\n",
            Path::new("p.toml"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.models[0].client_type, ClientType::AnthropicMessages);
        assert_eq!(
            cfg.models[0].resolved_base_url(),
            "https://api.anthropic.com"
        );
        assert!("gemini".parse::<ClientType>().is_err());
    }
}

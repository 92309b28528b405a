//! Configuration: tool definitions, the agent's `system_config.yaml` and the project's
//! `.project_config.toml`, with typed errors that name the file and the problem.

pub mod project;
pub mod system;
pub mod tools;

use std::path::{Path, PathBuf};

pub use project::{ClientType, ModelEntry, ModelRef, ProjectConfig};
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
    #[error("no model is configured: add one with `penguin config model add` or pass Model(...)")]
    NoModel,
    /// The reference names a model the project does not list.
    #[error("model {provider}/{model_id} is not configured in this project")]
    UnknownModel {
        /// Provider half.
        provider: String,
        /// Model half.
        model_id: String,
    },
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

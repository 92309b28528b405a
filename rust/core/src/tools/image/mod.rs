//! The image tools (SPEC §3 "Images", §6 "Vision"): `read_image` for session models that see
//! images, `describe_image` for text-only ones. Which of the two a session gets is decided by
//! the definitions' `forModel` and the model's `vision` flag (`Environment::new`).
//!
//! Data flow: both tools take a `source` (an http(s) URL or a workspace path) and load it
//! through [`source::load_image`], which enforces the formats, the 5 MiB limit and the exact
//! failure texts. `read_image` then returns the image itself as a data URL in
//! `ToolResult::images`; `describe_image` sends it, with a prompt, in one request to the
//! project's [`VisionModel`] and streams the answer back as its own output. Failures are
//! `failed` results the model reads, never tool errors.
//!
//! The module also builds the HTTP client ([`default_http_client`]) that
//! `ToolServices::default()` hands to tools.

pub mod describe_image;
pub mod read_image;
pub mod source;

use std::sync::{Arc, OnceLock};

use crate::llm::ModelClient;
use crate::tools::ToolArgs;

/// The project's `vision_model`: the model `describe_image` asks on behalf of a text-only
/// session model.
#[derive(Clone)]
pub struct VisionModel {
    /// A client for the model's wire protocol.
    pub client: Arc<dyn ModelClient>,
    /// The provider half of the model reference.
    pub provider: String,
    /// The model id, named in `describe_image`'s output.
    pub model_id: String,
}

impl std::fmt::Debug for VisionModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VisionModel")
            .field("provider", &self.provider)
            .field("model_id", &self.model_id)
            .finish_non_exhaustive()
    }
}

/// `User-Agent` of downloads: some image hosts refuse requests without one.
const USER_AGENT: &str = concat!("penguin-harness/", env!("CARGO_PKG_VERSION"));

/// The HTTP client of the tools: built once per process (a clone is a handle to it).
///
/// Building a client loads and parses the system's root certificates (~85 ms in a debug
/// build), too slow to repeat on a tokio worker for every session. One client is shared
/// instead, and it keeps no idle connections: a pooled connection belongs to the tokio runtime
/// that opened it and breaks when another runtime (tests, embedders) reuses it, while an image
/// download gains nothing from keep-alive.
///
/// When the system has no usable root certificates the client is built without them: plain
/// `http://` still works and `https://` downloads fail with a certificate error the model
/// reads, instead of the harness refusing to start.
pub fn default_http_client() -> reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(build_http_client).clone()
}

fn build_http_client() -> reqwest::Client {
    crate::llm::install_crypto_provider();
    let builder = || {
        reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .pool_max_idle_per_host(0)
    };
    builder()
        .build()
        .or_else(|_| builder().tls_certs_only(Vec::new()).build())
        .or_else(|_| builder().tls_certs_only(Vec::new()).no_proxy().build())
        // Unreachable in practice: with a provider installed, no system roots and no proxy
        // configuration, reqwest's builder has no step left that can fail.
        .unwrap_or_else(|_| reqwest::Client::new())
}

/// The `source` argument, or `None` when it is missing or blank (both get the SPEC's
/// "Missing required argument" text).
fn source_argument(args: &ToolArgs) -> Option<&str> {
    args.get("source")
        .and_then(|v| v.as_str())
        .filter(|s| !s.trim().is_empty())
}

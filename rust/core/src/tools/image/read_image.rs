//! `read_image` (SPEC §3, r, 60000 ms, offered to vision models): loads an image and hands it
//! to the session model as image content.
//!
//! Data flow: `source` → [`load_image`] → one output delta `<mime>, <size>` and the image as a
//! `data:<mime>;base64,...` URL in `ToolResult::images`; the Environment appends it after the
//! text (images are only kept on `completed` outputs). A failure is the load error's text as
//! a `failed` note.

use std::sync::Arc;

use async_trait::async_trait;

use super::source::{ImageError, load_image};
use crate::config::ToolDefinitionConfig;
use crate::tools::{Tool, ToolArgs, ToolContext, ToolError, ToolResult, ToolServices};

/// The `read_image` tool.
pub struct ReadImage {
    definition: ToolDefinitionConfig,
    http: reqwest::Client,
}

impl ReadImage {
    /// Builds the tool over its definition and an HTTP client for URLs.
    pub fn new(definition: ToolDefinitionConfig, http: reqwest::Client) -> Self {
        ReadImage { definition, http }
    }
}

/// The registry factory (`builtin_factory("read_image")`).
pub fn factory(definition: ToolDefinitionConfig, services: &ToolServices) -> Arc<dyn Tool> {
    Arc::new(ReadImage::new(definition, services.http.clone()))
}

#[async_trait]
impl Tool for ReadImage {
    fn definition(&self) -> &ToolDefinitionConfig {
        &self.definition
    }

    async fn execute(&self, args: ToolArgs, ctx: ToolContext) -> Result<ToolResult, ToolError> {
        let Some(source) = super::source_argument(&args) else {
            return Ok(ToolResult::failed(self.missing_argument_text("source")));
        };
        match load_image(source, &ctx.workspace_dir, &self.http, &ctx.cancel).await {
            Ok(image) => {
                ctx.output.delta(image.summary()).await;
                Ok(ToolResult {
                    images: Some(vec![image.data_url()]),
                    ..ToolResult::completed()
                })
            }
            Err(ImageError::Aborted) => Ok(ToolResult::aborted()),
            Err(err) => Ok(ToolResult::failed(err.to_string())),
        }
    }
}

//! Images through a whole session: the tool offered follows the session model's vision flag,
//! and `describe_image` asks the project's `vision_model` over real HTTP.

use std::sync::Arc;

use penguin_harness_core::approval::{Decision, FixedApprover};
use penguin_harness_core::config::ClientType;
use penguin_harness_tests::agent::{TestAgent, output_of, run_task, system_yaml};
use penguin_harness_tests::sse::openai;
use penguin_harness_tests::{Reply, ScriptedServer};

/// A 1x1 transparent PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

#[tokio::test]
async fn a_text_only_session_describes_images_through_the_vision_model() {
    let server = ScriptedServer::start(vec![
        Reply::sse(openai::tool_calls(&[(
            "call_1",
            "describe_image",
            r#"{"source":"dot.png","prompt":"What is it?"}"#,
        )])),
        Reply::sse(openai::text("A single transparent pixel.")),
        Reply::sse(openai::text("It is a pixel.")),
    ])
    .await;
    let project = format!(
        "vision_model = {{ provider = \"vis\", model_id = \"eye-1\" }}\n\n[[models]]\nprovider = \"vis\"\nmodel_id = \"eye-1\"\nbase_url = \"{}\"\napi_key = \"sk-vision\"\n",
        server.openai_base_url()
    );
    let t = TestAgent::with_files(&system_yaml(-1, 30_000), Some(&project));
    std::fs::write(t.workspace.path().join("dot.png"), PNG).unwrap_or_else(|e| panic!("{e}"));
    let session = t.session_with(ClientType::OpenAiChat, &server.openai_base_url(), |m| {
        m.vision = false
    });
    let names: Vec<String> = session.tools().into_iter().map(|t| t.name).collect();
    assert!(
        names.contains(&"describe_image".to_owned()) && !names.contains(&"read_image".to_owned()),
        "{names:?}"
    );

    let stream = run_task(
        &session,
        "look at dot.png",
        Some(Arc::new(FixedApprover(Decision::Allow))),
    )
    .await;
    assert_eq!(
        output_of(&stream, "call_1").as_deref(),
        Some("image/png, 67 B — described by eye-1:\nA single transparent pixel.")
    );
    // The vision request: the vision model's id and key, no tools, the prompt and the image.
    let vision = &server.requests()[1];
    assert_eq!(vision.body["model"], "eye-1");
    assert_eq!(vision.header("authorization"), Some("Bearer sk-vision"));
    assert!(vision.body.get("tools").is_none(), "{}", vision.body);
    let content = vision.body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(|m| m["content"].clone());
    let content = content.unwrap_or_default();
    let parts = content.as_array().cloned().unwrap_or_default();
    assert!(
        parts.iter().any(|p| p["text"] == "What is it?"),
        "{content}"
    );
    assert!(
        parts.iter().any(|p| p["image_url"]["url"]
            .as_str()
            .is_some_and(|u| u.starts_with("data:image/png;base64,iVBOR"))),
        "{content}"
    );
}

#[tokio::test]
async fn a_vision_session_reads_images_into_the_next_request() {
    let server = ScriptedServer::start(vec![
        Reply::sse(openai::tool_calls(&[(
            "call_1",
            "read_image",
            r#"{"source":"dot.png"}"#,
        )])),
        Reply::sse(openai::text("A pixel.")),
    ])
    .await;
    let t = TestAgent::new();
    std::fs::write(t.workspace.path().join("dot.png"), PNG).unwrap_or_else(|e| panic!("{e}"));
    let session = t.session(ClientType::OpenAiChat, &server.openai_base_url());
    let names: Vec<String> = session.tools().into_iter().map(|t| t.name).collect();
    assert!(
        names.contains(&"read_image".to_owned()) && !names.contains(&"describe_image".to_owned()),
        "{names:?}"
    );
    let stream = run_task(
        &session,
        "look",
        Some(Arc::new(FixedApprover(Decision::Allow))),
    )
    .await;
    let out = stream
        .iter()
        .filter_map(|m| m.as_tool_call_output())
        .next()
        .cloned();
    let out = out.unwrap_or_else(|| panic!("no output"));
    assert_eq!(out.output, "image/png, 67 B");
    assert_eq!(out.images.as_ref().map(Vec::len), Some(1));
    // The image reaches the model in the next request as an image_url part.
    let body = server.requests()[1].body.to_string();
    assert!(body.contains("data:image/png;base64,iVBOR"), "{body}");
}

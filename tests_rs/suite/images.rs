//! `read_image` and `describe_image` driven through `Environment::execute_tool`: real files in
//! a temporary workspace, a real HTTP file server on 127.0.0.1, and, for `describe_image`, a
//! vision `ModelClient` that records the request it was given and streams a scripted answer.
//! Every test compares the complete tool output (text, images, stop reason).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use base64::Engine as _;
use penguin_harness_core::config::default_tool_definitions;
use penguin_harness_core::environment::Environment;
use penguin_harness_core::llm::{LlmOutcome, ModelClient, ModelRequest, ThinkingLevel};
use penguin_harness_core::protocol::{
    self, EventType, ModelPayload, OmniMessage, PartialAggregator, Role, StopReason, TokenCounts,
    ToolCallOutputPayload, ToolSpec,
};
use penguin_harness_core::tools::ToolServices;
use penguin_harness_core::tools::image::VisionModel;
use penguin_harness_core::tools::image::describe_image::DEFAULT_PROMPT;
use penguin_harness_core::tools::image::source::MAX_IMAGE_BYTES;
use penguin_harness_tests::{FileServer, Framing, Resource, TempDir};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

// Tiny real images (checked with `file`): a 1x1 RGBA PNG, a 1x1 JFIF JPEG, a 1x1 GIF89a and
// a 1x1 lossless WebP.
const PNG: &str = "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c63f8cfc0f01f00050001ff89993d1d0000000049454e44ae426082";
const JPEG: &str = "ffd8ffe000104a46494600010101004800480000ffdb004300ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffc2000b080001000101011100ffc40014100100000000000000000000000000000000ffda0008010100013f10";
const GIF: &str = "47494638396101000100800000ff00000000002c00000000010001000002024401003b";
const WEBP: &str = "524946461a000000574542505650384c0d0000002f00000010071011118888fe0700";

const CALL_ID: &str = "call_1";
const MAX: usize = MAX_IMAGE_BYTES as usize;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn data_url(mime: &str, bytes: &[u8]) -> String {
    format!(
        "data:{mime};base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

/// A PNG signature followed by zeros: `len` bytes that sniff as PNG.
fn png_of_len(len: usize) -> Vec<u8> {
    let mut v = hex(PNG);
    v.resize(len, 0);
    v
}

fn output(text: &str, stop: StopReason, images: Option<Vec<String>>) -> ToolCallOutputPayload {
    ToolCallOutputPayload {
        role: Role::User,
        output: text.to_owned(),
        images,
        tool_call_id: CALL_ID.to_owned(),
        stop_reason: stop,
    }
}

fn image_output(summary: &str, mime: &str, bytes: &[u8]) -> ToolCallOutputPayload {
    output(
        summary,
        StopReason::Completed,
        Some(vec![data_url(mime, bytes)]),
    )
}

fn failed(text: &str) -> ToolCallOutputPayload {
    output(text, StopReason::Failed, None)
}

struct Run {
    stream: Vec<OmniMessage>,
    output: ToolCallOutputPayload,
}

impl Run {
    /// The text deltas of the call's own output, in order.
    fn deltas(&self) -> Vec<String> {
        self.stream
            .iter()
            .filter_map(|m| match m.model() {
                Some(ModelPayload::PartialToolCallOutput(p))
                    if p.event_type == EventType::Delta && !p.output.is_empty() =>
                {
                    Some(p.output.clone())
                }
                _ => None,
            })
            .collect()
    }
}

/// Executes one call; `observe` sees every streamed message as it arrives.
async fn run_observed(
    env: &Environment,
    name: &str,
    args: &str,
    cancel: &CancellationToken,
    mut observe: impl FnMut(&OmniMessage) + Send + 'static,
) -> Run {
    let call = protocol::tool_call(name, args, CALL_ID, StopReason::Completed)
        .as_tool_call()
        .cloned()
        .unwrap();
    let (tx, mut rx) = mpsc::channel(1024);
    let collector = tokio::spawn(async move {
        let mut v = Vec::new();
        while let Some(m) = rx.recv().await {
            observe(&m);
            v.push(m);
        }
        v
    });
    let output = env.execute_tool(&call, cancel, None, &tx).await;
    drop(tx);
    let stream = collector.await.unwrap();
    check_framing(&stream, &output);
    Run { stream, output }
}

async fn run(env: &Environment, name: &str, args: serde_json::Value) -> Run {
    run_observed(
        env,
        name,
        &args.to_string(),
        &CancellationToken::new(),
        |_| {},
    )
    .await
}

/// start → deltas → (images) → stop → complete; the folded partials equal the complete output.
fn check_framing(stream: &[OmniMessage], output: &ToolCallOutputPayload) {
    assert!(
        matches!(stream.first().and_then(|m| m.model()),
            Some(ModelPayload::PartialToolCallOutput(p)) if p.event_type == EventType::Start),
        "the stream starts with start"
    );
    assert_eq!(
        stream.last().and_then(|m| m.as_tool_call_output()),
        Some(output)
    );
    let mut agg = PartialAggregator::new();
    let folded: Vec<ModelPayload> = stream[..stream.len() - 1]
        .iter()
        .filter_map(|m| agg.push(m))
        .collect();
    assert_eq!(folded, vec![ModelPayload::ToolCallOutput(output.clone())]);
}

fn vision_env(workspace: &TempDir) -> Environment {
    Environment::new(
        workspace.path(),
        default_tool_definitions(),
        true,
        ToolServices::default(),
    )
}

// ---------------------------------------------------------------------------------------------
// read_image: files

#[tokio::test]
async fn read_image_returns_each_format_from_a_workspace_file() {
    let ws = TempDir::new("img-formats");
    let env = vision_env(&ws);
    let table = [
        ("pixel.png", PNG, "image/png", "image/png, 70 B"),
        ("pixel.jpg", JPEG, "image/jpeg", "image/jpeg, 134 B"),
        ("pixel.gif", GIF, "image/gif", "image/gif, 35 B"),
        ("pixel.webp", WEBP, "image/webp", "image/webp, 34 B"),
    ];
    for (name, hexed, mime, summary) in table {
        let bytes = hex(hexed);
        std::fs::write(ws.path().join(name), &bytes).unwrap();
        let r = run(&env, "read_image", serde_json::json!({ "source": name })).await;
        assert_eq!(r.output, image_output(summary, mime, &bytes), "{name}");
        assert_eq!(r.deltas(), vec![summary.to_owned()], "{name}");
    }
}

#[tokio::test]
async fn paths_resolve_against_the_workspace_and_absolute_paths_work() {
    let ws = TempDir::new("img-paths");
    let elsewhere = TempDir::new("img-elsewhere");
    let env = vision_env(&ws);
    let png = hex(PNG);
    std::fs::create_dir_all(ws.path().join("shots")).unwrap();
    std::fs::write(ws.path().join("shots/a.png"), &png).unwrap();
    let abs = elsewhere.path().join("b.gif");
    std::fs::write(&abs, hex(GIF)).unwrap();

    let rel = run(
        &env,
        "read_image",
        serde_json::json!({"source": "shots/a.png"}),
    )
    .await;
    assert_eq!(
        rel.output,
        image_output("image/png, 70 B", "image/png", &png)
    );
    let dotted = run(
        &env,
        "read_image",
        serde_json::json!({"source": "./shots/../shots/a.png"}),
    )
    .await;
    assert_eq!(dotted.output, rel.output);
    let absolute = run(
        &env,
        "read_image",
        serde_json::json!({"source": abs.to_string_lossy()}),
    )
    .await;
    assert_eq!(
        absolute.output,
        image_output("image/gif, 35 B", "image/gif", &hex(GIF))
    );
}

#[tokio::test]
async fn magic_bytes_beat_the_extension_which_is_the_fallback() {
    let ws = TempDir::new("img-magic");
    let env = vision_env(&ws);
    let png = hex(PNG);
    std::fs::write(ws.path().join("really-a-png.gif"), &png).unwrap();
    std::fs::write(ws.path().join("opaque.JPG"), b"not magic").unwrap();
    let r = run(
        &env,
        "read_image",
        serde_json::json!({"source": "really-a-png.gif"}),
    )
    .await;
    assert_eq!(r.output, image_output("image/png, 70 B", "image/png", &png));
    let r = run(
        &env,
        "read_image",
        serde_json::json!({"source": "opaque.JPG"}),
    )
    .await;
    assert_eq!(
        r.output,
        image_output("image/jpeg, 9 B", "image/jpeg", b"not magic")
    );
}

#[tokio::test]
async fn file_failures_have_the_exact_texts() {
    let ws = TempDir::new("img-file-fail");
    let env = vision_env(&ws);
    std::fs::create_dir(ws.path().join("folder")).unwrap();
    std::fs::write(ws.path().join("notes.txt"), "just text\n").unwrap();
    std::fs::write(ws.path().join("empty.png"), b"").unwrap();
    std::fs::write(ws.path().join("big.png"), png_of_len(6 * 1024 * 1024)).unwrap();
    std::fs::write(ws.path().join("over.png"), png_of_len(MAX + 1)).unwrap();
    let missing = ws.path().join("missing.png");

    let table = [
        (
            serde_json::json!({"source": "missing.png"}),
            format!(
                "Failed to read image \"missing.png\": {} does not exist.",
                missing.display()
            ),
        ),
        (
            serde_json::json!({"source": "folder"}),
            "Failed to read image \"folder\": path is not a file.".to_owned(),
        ),
        (
            // A character device: refused by the stat, never read (it would never end).
            serde_json::json!({"source": "/dev/zero"}),
            "Failed to read image \"/dev/zero\": path is not a file.".to_owned(),
        ),
        (
            serde_json::json!({"source": "notes.txt"}),
            "Unsupported image type: only png, jpeg, gif and webp are supported.".to_owned(),
        ),
        (
            serde_json::json!({"source": "empty.png"}),
            "Image \"empty.png\" is empty.".to_owned(),
        ),
        (
            serde_json::json!({"source": "big.png"}),
            "Image too large: 6.0 MB exceeds the 5.0 MB limit.".to_owned(),
        ),
        (
            serde_json::json!({"source": "over.png"}),
            "Image too large: 5.0 MB exceeds the 5.0 MB limit.".to_owned(),
        ),
        (
            serde_json::json!({}),
            "Missing required argument \"source\" for read_image.".to_owned(),
        ),
        (
            serde_json::json!({"source": ""}),
            "Missing required argument \"source\" for read_image.".to_owned(),
        ),
        (
            serde_json::json!({"source": "  \t"}),
            "Missing required argument \"source\" for read_image.".to_owned(),
        ),
    ];
    for (args, want) in table {
        let r = run(&env, "read_image", args.clone()).await;
        assert_eq!(r.output, failed(&want), "{args}");
    }
}

#[tokio::test]
async fn an_image_of_exactly_the_limit_is_accepted() {
    let ws = TempDir::new("img-limit");
    let env = vision_env(&ws);
    let bytes = png_of_len(MAX);
    std::fs::write(ws.path().join("edge.png"), &bytes).unwrap();
    let r = run(
        &env,
        "read_image",
        serde_json::json!({"source": "edge.png"}),
    )
    .await;
    assert_eq!(
        r.output,
        image_output("image/png, 5.0 MB", "image/png", &bytes)
    );
}

// ---------------------------------------------------------------------------------------------
// read_image: URLs

#[tokio::test]
async fn urls_take_the_type_from_the_header_then_magic_then_extension() {
    let ws = TempDir::new("img-url");
    let env = vision_env(&ws);
    let server = FileServer::start().await;
    let (png, jpeg, gif, webp) = (hex(PNG), hex(JPEG), hex(GIF), hex(WEBP));
    server.put("/a.png", Resource::ok(Some("image/png"), png.clone()));
    // A supported header wins even over other magic bytes.
    server.put("/labelled", Resource::ok(Some("image/webp"), gif.clone()));
    // An unsupported header falls back to the magic bytes.
    server.put(
        "/blob",
        Resource::ok(Some("application/octet-stream"), jpeg.clone()),
    );
    // No header and no magic: the URL's extension.
    server.put("/raw.GIF?v=2", Resource::ok(None, b"\x00\x01".to_vec()));
    // Chunked transfer without a content-length.
    server.put(
        "/chunked.webp",
        Resource::ok(Some("image/webp; q=1"), webp.clone()).framed(Framing::Chunked(5)),
    );

    let table = [
        ("/a.png", "image/png, 70 B", "image/png", png.clone()),
        ("/labelled", "image/webp, 35 B", "image/webp", gif.clone()),
        ("/blob", "image/jpeg, 134 B", "image/jpeg", jpeg.clone()),
        (
            "/raw.GIF?v=2",
            "image/gif, 2 B",
            "image/gif",
            b"\x00\x01".to_vec(),
        ),
        (
            "/chunked.webp",
            "image/webp, 34 B",
            "image/webp",
            webp.clone(),
        ),
    ];
    for (path, summary, mime, bytes) in table {
        let r = run(
            &env,
            "read_image",
            serde_json::json!({"source": server.url(path)}),
        )
        .await;
        assert_eq!(r.output, image_output(summary, mime, &bytes), "{path}");
    }
    assert_eq!(
        server.requests(),
        vec![
            "/a.png",
            "/labelled",
            "/blob",
            "/raw.GIF?v=2",
            "/chunked.webp"
        ]
    );
}

#[tokio::test]
async fn url_failures_have_the_exact_texts() {
    let ws = TempDir::new("img-url-fail");
    let env = vision_env(&ws);
    let server = FileServer::start().await;
    server.put(
        "/page",
        Resource::ok(Some("text/html; charset=utf-8"), "<html>hi</html>"),
    );
    server.put("/unknown", Resource::ok(None, "plain words"));
    server.put("/empty.png", Resource::ok(Some("image/png"), Vec::new()));
    server.put(
        "/gone.png",
        Resource::ok(Some("image/png"), hex(PNG)).with_status(410),
    );
    // Too large by content-length: the real 6 MiB body...
    server.put(
        "/big.png",
        Resource::ok(Some("image/png"), png_of_len(6 * 1024 * 1024)),
    );
    // ...and a declared 6 MiB with a 9-byte body: reading that body would fail as an incomplete
    // transfer, so the text proves the header alone decided.
    server.put(
        "/declared.png",
        Resource::ok(Some("image/png"), b"\x89PNG12345".to_vec())
            .framed(Framing::Declared(6 * 1024 * 1024)),
    );
    // Without a length, one byte over the limit.
    server.put(
        "/over.png",
        Resource::ok(Some("image/png"), png_of_len(MAX + 1)).framed(Framing::Chunked(64 * 1024)),
    );

    let url = |p: &str| server.url(p);
    let table = [
        (
            url("/missing.png"),
            format!(
                "Failed to download image \"{}\": HTTP 404",
                url("/missing.png")
            ),
        ),
        (
            url("/gone.png"),
            format!(
                "Failed to download image \"{}\": HTTP 410",
                url("/gone.png")
            ),
        ),
        (
            url("/page"),
            "Unsupported image type \"text/html\": only png, jpeg, gif and webp are supported."
                .to_owned(),
        ),
        (
            url("/unknown"),
            "Unsupported image type: only png, jpeg, gif and webp are supported.".to_owned(),
        ),
        (
            url("/empty.png"),
            format!("Image \"{}\" is empty.", url("/empty.png")),
        ),
        (
            url("/big.png"),
            "Image too large: 6.0 MB exceeds the 5.0 MB limit.".to_owned(),
        ),
        (
            url("/declared.png"),
            "Image too large: 6.0 MB exceeds the 5.0 MB limit.".to_owned(),
        ),
        (
            url("/over.png"),
            "Image too large: 5.0 MB exceeds the 5.0 MB limit.".to_owned(),
        ),
    ];
    for (source, want) in table {
        let r = run(&env, "read_image", serde_json::json!({ "source": source })).await;
        assert_eq!(r.output, failed(&want), "{source}");
    }
}

#[tokio::test]
async fn a_chunked_body_of_exactly_the_limit_is_accepted() {
    let ws = TempDir::new("img-url-limit");
    let env = vision_env(&ws);
    let server = FileServer::start().await;
    let bytes = png_of_len(MAX);
    server.put(
        "/edge",
        Resource::ok(None, bytes.clone()).framed(Framing::Chunked(100_000)),
    );
    let r = run(
        &env,
        "read_image",
        serde_json::json!({"source": server.url("/edge")}),
    )
    .await;
    assert_eq!(
        r.output,
        image_output("image/png, 5.0 MB", "image/png", &bytes)
    );
}

#[tokio::test]
async fn an_endless_body_is_cut_off_just_past_the_limit() {
    let ws = TempDir::new("img-url-endless");
    let env = vision_env(&ws);
    let server = FileServer::start().await;
    server.put(
        "/endless",
        Resource::ok(Some("image/png"), png_of_len(64 * 1024)).framed(Framing::Endless),
    );
    let r = run(
        &env,
        "read_image",
        serde_json::json!({"source": server.url("/endless")}),
    )
    .await;
    // The size is what had arrived when the limit was passed: the limit plus at most one
    // network chunk, so its first decimal depends on how the bytes were split in transit.
    let text = &r.output.output;
    let size = text
        .strip_prefix("Image too large: ")
        .and_then(|t| t.strip_suffix(" MB exceeds the 5.0 MB limit."))
        .and_then(|t| t.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("unexpected output: {text}"));
    assert!((5.0..5.5).contains(&size), "{text}");
    assert_eq!(r.output, failed(text));
}

#[tokio::test]
async fn a_refused_connection_is_a_download_failure() {
    let ws = TempDir::new("img-url-refused");
    let env = vision_env(&ws);
    // A port that was just free: nothing listens there any more.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let source = format!("http://127.0.0.1:{port}/a.png");
    let r = run(&env, "read_image", serde_json::json!({ "source": source })).await;
    let text = &r.output.output;
    // The tail is the operating system's wording.
    let prefix = format!("Failed to download image \"{source}\": ");
    assert!(
        text.starts_with(&prefix) && text.contains("Connection refused"),
        "{text}"
    );
    assert_eq!(r.output, failed(text));
}

#[tokio::test]
async fn the_user_abort_ends_a_stalled_download() {
    let ws = TempDir::new("img-url-abort");
    let env = vision_env(&ws);
    let server = FileServer::start().await;
    server.put(
        "/stall.png",
        Resource::ok(Some("image/png"), hex(PNG)).framed(Framing::Stall),
    );
    let cancel = CancellationToken::new();
    // Abort once the server holds the request (polling the server's record, not a timer).
    let abort_when_requested = async {
        while server.requests().is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        cancel.cancel();
    };
    let args = serde_json::json!({"source": server.url("/stall.png")}).to_string();
    let (r, ()) = tokio::join!(
        run_observed(&env, "read_image", &args, &cancel, |_| {}),
        abort_when_requested
    );
    assert_eq!(
        r.output,
        output(
            "[interrupted: tool aborted by user]",
            StopReason::Aborted,
            None
        )
    );
}

#[tokio::test(start_paused = true)]
async fn a_stalled_download_ends_at_the_tool_timeout() {
    let ws = TempDir::new("img-url-timeout");
    let env = vision_env(&ws);
    let server = FileServer::start().await;
    server.put(
        "/stall.png",
        Resource::ok(Some("image/png"), hex(PNG)).framed(Framing::Stall),
    );
    let r = run(
        &env,
        "read_image",
        serde_json::json!({"source": server.url("/stall.png")}),
    )
    .await;
    assert_eq!(r.output, failed("[tool timeout: exceeded 60000ms]"));
}

// ---------------------------------------------------------------------------------------------
// Which tool a session gets

#[test]
fn the_vision_flag_picks_the_image_tool() {
    let names = |vision: bool| -> Vec<String> {
        Environment::new(
            "/tmp",
            default_tool_definitions(),
            vision,
            ToolServices::default(),
        )
        .list_tools()
        .into_iter()
        .map(|t| t.name)
        .filter(|n| n.ends_with("_image"))
        .collect()
    };
    assert_eq!(names(true), vec!["read_image"]);
    assert_eq!(names(false), vec!["describe_image"]);
    let specs: Vec<ToolSpec> = Environment::new(
        "/tmp",
        default_tool_definitions(),
        false,
        ToolServices::default(),
    )
    .list_tools();
    let describe = specs.iter().find(|s| s.name == "describe_image").unwrap();
    assert_eq!(
        describe.parameters.as_ref().unwrap()["required"],
        serde_json::json!(["source"])
    );
}

// ---------------------------------------------------------------------------------------------
// describe_image

/// What the vision client does after recording the request.
enum Step {
    /// Streams a `partial_thinking` delta (must not reach the tool output).
    Thinking(&'static str),
    /// Streams a `partial_text` delta.
    Text(&'static str),
    /// Waits until the test opens the gate.
    Gate,
    /// Waits for the cancel token, then reports `aborted`.
    UntilCancelled,
    /// Never returns, whatever the token says.
    Forever,
}

/// The request as the client saw it, owned.
#[derive(Debug, PartialEq)]
struct SeenRequest {
    system_prompt: String,
    messages: Vec<ModelPayload>,
    tools: Vec<ToolSpec>,
    thinking: Option<ThinkingLevel>,
    max_tokens: Option<u64>,
}

struct ScriptedVision {
    steps: Vec<Step>,
    outcome: LlmOutcome,
    gate: Notify,
    started: Notify,
    seen: Mutex<Vec<SeenRequest>>,
    tokens: Mutex<Vec<CancellationToken>>,
}

impl ScriptedVision {
    fn new(steps: Vec<Step>, outcome: LlmOutcome) -> Arc<Self> {
        Arc::new(ScriptedVision {
            steps,
            outcome,
            gate: Notify::new(),
            started: Notify::new(),
            seen: Mutex::new(Vec::new()),
            tokens: Mutex::new(Vec::new()),
        })
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Vec<SeenRequest>> {
        self.seen.lock().unwrap()
    }
}

#[async_trait]
impl ModelClient for ScriptedVision {
    async fn stream(
        &self,
        request: ModelRequest<'_>,
        cancel: CancellationToken,
        out: &mpsc::Sender<OmniMessage>,
    ) -> LlmOutcome {
        self.seen.lock().unwrap().push(SeenRequest {
            system_prompt: request.system_prompt.to_owned(),
            messages: request
                .messages
                .iter()
                .filter_map(|m| m.model().cloned())
                .collect(),
            tools: request.tools.to_vec(),
            thinking: request.thinking,
            max_tokens: request.max_tokens,
        });
        self.tokens.lock().unwrap().push(cancel.clone());
        self.started.notify_one();
        let mut text = String::new();
        let _ = out
            .send(protocol::partial_text(
                EventType::Start,
                "",
                StopReason::Completed,
            ))
            .await;
        for step in &self.steps {
            match step {
                Step::Thinking(t) => {
                    let _ = out
                        .send(protocol::partial_thinking(
                            EventType::Delta,
                            *t,
                            StopReason::Completed,
                        ))
                        .await;
                }
                Step::Text(t) => {
                    text.push_str(t);
                    let _ = out
                        .send(protocol::partial_text(
                            EventType::Delta,
                            *t,
                            StopReason::Completed,
                        ))
                        .await;
                }
                Step::Gate => self.gate.notified().await,
                Step::UntilCancelled => {
                    cancel.cancelled().await;
                    return LlmOutcome::error(StopReason::Aborted, "aborted by user");
                }
                Step::Forever => std::future::pending::<()>().await,
            }
        }
        let stop = self.outcome.status;
        let _ = out
            .send(protocol::partial_text(EventType::Stop, "", stop))
            .await;
        let _ = out.send(protocol::assistant_text(text, stop)).await;
        self.outcome.clone()
    }
}

fn completed() -> LlmOutcome {
    LlmOutcome::completed(Some(TokenCounts::new(0, 90, 12)))
}

fn describe_env(workspace: &TempDir, client: Option<Arc<ScriptedVision>>) -> Environment {
    let services = ToolServices {
        vision: client.map(|c| VisionModel {
            client: c,
            provider: "scripted".into(),
            model_id: "vision-1".into(),
        }),
        ..ToolServices::default()
    };
    Environment::new(
        workspace.path(),
        default_tool_definitions(),
        false,
        services,
    )
}

fn workspace_with_png(label: &str) -> TempDir {
    let ws = TempDir::new(label);
    std::fs::write(ws.path().join("pixel.png"), hex(PNG)).unwrap();
    ws
}

const HEADER: &str = "image/png, 70 B — described by vision-1:\n";

#[tokio::test]
async fn describe_image_streams_the_answer_of_one_clean_request() {
    let ws = workspace_with_png("describe-ok");
    let client = ScriptedVision::new(
        vec![
            Step::Thinking("looking closely"),
            Step::Text("A single "),
            Step::Text("red pixel."),
        ],
        completed(),
    );
    let env = describe_env(&ws, Some(client.clone()));
    let r = run(
        &env,
        "describe_image",
        serde_json::json!({"source": "pixel.png", "prompt": "What colour is it?"}),
    )
    .await;
    assert_eq!(
        r.output,
        output(
            &format!("{HEADER}A single red pixel."),
            StopReason::Completed,
            None
        )
    );
    // Forwarded delta by delta, thinking left out.
    assert_eq!(r.deltas(), vec![HEADER, "A single ", "red pixel."]);
    let png_url = data_url("image/png", &hex(PNG));
    assert_eq!(
        *client.seen(),
        vec![SeenRequest {
            system_prompt: String::new(),
            messages: vec![
                protocol::user_text("What colour is it?")
                    .model()
                    .cloned()
                    .unwrap(),
                protocol::user_image_url(png_url).model().cloned().unwrap(),
            ],
            tools: Vec::new(),
            thinking: Some(ThinkingLevel::None),
            max_tokens: Some(2048),
        }]
    );
}

#[tokio::test]
async fn describe_image_uses_the_default_prompt_and_reads_urls() {
    let ws = TempDir::new("describe-default");
    let server = FileServer::start().await;
    server.put("/p.gif", Resource::ok(Some("image/gif"), hex(GIF)));
    let client = ScriptedVision::new(vec![Step::Text("A dot.")], completed());
    let env = describe_env(&ws, Some(client.clone()));
    for prompt in [None, Some("   ")] {
        let mut args = serde_json::json!({"source": server.url("/p.gif")});
        if let Some(p) = prompt {
            args["prompt"] = p.into();
        }
        let r = run(&env, "describe_image", args).await;
        assert_eq!(
            r.output,
            output(
                "image/gif, 35 B — described by vision-1:\nA dot.",
                StopReason::Completed,
                None
            )
        );
    }
    let expected = vec![
        protocol::user_text(DEFAULT_PROMPT)
            .model()
            .cloned()
            .unwrap(),
        protocol::user_image_url(data_url("image/gif", &hex(GIF)))
            .model()
            .cloned()
            .unwrap(),
    ];
    let seen = client.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|s| s.messages == expected));
}

#[tokio::test]
async fn describe_image_forwards_text_while_the_request_is_still_running() {
    let ws = workspace_with_png("describe-live");
    // The client holds its second piece back until the test has seen the first one arrive
    // as tool output; a tool that buffered the answer would never open the gate.
    let client = ScriptedVision::new(
        vec![
            Step::Text("first, "),
            Step::Gate,
            Step::Text("then the rest"),
        ],
        completed(),
    );
    let env = describe_env(&ws, Some(client.clone()));
    let opener = client.clone();
    let r = run_observed(
        &env,
        "describe_image",
        r#"{"source":"pixel.png"}"#,
        &CancellationToken::new(),
        move |m| {
            if let Some(ModelPayload::PartialToolCallOutput(p)) = m.model() {
                if p.output == "first, " {
                    opener.gate.notify_one();
                }
            }
        },
    )
    .await;
    assert_eq!(
        r.output,
        output(
            &format!("{HEADER}first, then the rest"),
            StopReason::Completed,
            None
        )
    );
}

#[tokio::test]
async fn describe_image_without_a_vision_model_asks_for_one() {
    let ws = workspace_with_png("describe-none");
    let env = describe_env(&ws, None);
    let r = run(
        &env,
        "describe_image",
        serde_json::json!({"source": "pixel.png"}),
    )
    .await;
    assert_eq!(
        r.output,
        failed(
            "No vision model is configured for this project, and the current model does not \
             accept images. Ask the user to configure a `vision_model` (provider and model_id) \
             in the project config (.project_config.toml) so describe_image can work."
        )
    );
    // A missing source is reported first, with the shared wording.
    let r = run(&env, "describe_image", serde_json::json!({"source": " "})).await;
    assert_eq!(
        r.output,
        failed("Missing required argument \"source\" for describe_image.")
    );
}

#[tokio::test]
async fn describe_image_reports_a_failed_request_after_what_it_streamed() {
    let ws = workspace_with_png("describe-fail");
    let client = ScriptedVision::new(
        vec![Step::Text("Partly")],
        LlmOutcome::error(StopReason::Failed, "HTTP 400: image rejected"),
    );
    let env = describe_env(&ws, Some(client));
    let r = run(
        &env,
        "describe_image",
        serde_json::json!({"source": "pixel.png"}),
    )
    .await;
    assert_eq!(
        r.output,
        failed(&format!(
            "{HEADER}Partly\nVision model (vision-1) request failed: HTTP 400: image rejected"
        ))
    );

    let silent = ScriptedVision::new(
        Vec::new(),
        LlmOutcome {
            status: StopReason::Auth,
            error_message: None,
            permanent: true,
            usage: None,
        },
    );
    let env = describe_env(&ws, Some(silent));
    let r = run(
        &env,
        "describe_image",
        serde_json::json!({"source": "pixel.png"}),
    )
    .await;
    assert_eq!(
        r.output,
        failed(&format!("{HEADER}Vision model (vision-1) request auth"))
    );
}

#[tokio::test]
async fn describe_image_marks_an_empty_answer() {
    let ws = workspace_with_png("describe-empty");
    let client = ScriptedVision::new(vec![Step::Thinking("nothing to say")], completed());
    let env = describe_env(&ws, Some(client));
    let r = run(
        &env,
        "describe_image",
        serde_json::json!({"source": "pixel.png"}),
    )
    .await;
    assert_eq!(
        r.output,
        output(
            &format!("{HEADER}[vision model returned no text]"),
            StopReason::Completed,
            None
        )
    );
}

#[tokio::test]
async fn describe_image_does_not_ask_when_the_image_fails_to_load() {
    let ws = TempDir::new("describe-load-fail");
    std::fs::write(ws.path().join("notes.txt"), "text").unwrap();
    let client = ScriptedVision::new(vec![Step::Text("never")], completed());
    let env = describe_env(&ws, Some(client.clone()));
    let r = run(
        &env,
        "describe_image",
        serde_json::json!({"source": "notes.txt"}),
    )
    .await;
    assert_eq!(
        r.output,
        failed("Unsupported image type: only png, jpeg, gif and webp are supported.")
    );
    assert!(client.seen().is_empty());
}

#[tokio::test]
async fn the_user_abort_cancels_the_vision_request() {
    let ws = workspace_with_png("describe-abort");
    let client = ScriptedVision::new(vec![Step::UntilCancelled], completed());
    let env = describe_env(&ws, Some(client.clone()));
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let started = client.clone();
    let aborter = tokio::spawn(async move {
        started.started.notified().await;
        trigger.cancel();
    });
    let r = run_observed(
        &env,
        "describe_image",
        r#"{"source":"pixel.png"}"#,
        &cancel,
        |_| {},
    )
    .await;
    aborter.await.unwrap();
    assert_eq!(
        r.output,
        output(
            &format!("{HEADER}\n[interrupted: tool aborted by user]"),
            StopReason::Aborted,
            None
        )
    );
    let tokens = client.tokens.lock().unwrap();
    assert_eq!(tokens.len(), 1);
    assert!(
        tokens[0].is_cancelled(),
        "the request's token was cancelled"
    );
}

#[tokio::test(start_paused = true)]
async fn a_vision_request_that_never_answers_fails_after_60_seconds() {
    let ws = workspace_with_png("describe-timeout");
    let client = ScriptedVision::new(vec![Step::Text("Half"), Step::Forever], completed());
    let env = describe_env(&ws, Some(client.clone()));
    let r = run(
        &env,
        "describe_image",
        serde_json::json!({"source": "pixel.png"}),
    )
    .await;
    assert_eq!(
        r.output,
        failed(&format!(
            "{HEADER}Half\nVision model (vision-1) request timeout: no complete answer within 60000 ms"
        ))
    );
    assert!(client.tokens.lock().unwrap()[0].is_cancelled());
}

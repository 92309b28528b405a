//! execute_tool against real tool futures: framing, argument texts, schema violations,
//! timeouts merged with abort, panics, tools that ignore cancellation, origin pass-through.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::config::{Permission, ToolDefinitionConfig};
use crate::protocol::{self, ModelPayload, OmniMessage, PartialAggregator, StopReason};
use crate::tools::{ToolArgs, ToolContext, ToolError, ToolResult};

/// What the scripted tool does, chosen by its `mode` argument.
struct Scripted {
    def: ToolDefinitionConfig,
}

#[async_trait]
impl Tool for Scripted {
    fn definition(&self) -> &ToolDefinitionConfig {
        &self.def
    }

    async fn execute(&self, args: ToolArgs, ctx: ToolContext) -> Result<ToolResult, ToolError> {
        let mode = args
            .get("mode")
            .and_then(|v| v.as_str())
            .unwrap_or("echo")
            .to_owned();
        match mode.as_str() {
            "echo" => {
                ctx.output.delta(format!("id={}", ctx.tool_call_id)).await;
                Ok(ToolResult::completed())
            }
            "flood" => {
                for _ in 0..1000 {
                    ctx.output.delta("x".repeat(100)).await;
                }
                Ok(ToolResult::failed("[exit code: 3]"))
            }
            "sleep" => {
                ctx.output.delta("waiting").await;
                ctx.cancel.cancelled().await;
                Ok(ToolResult::aborted())
            }
            "stubborn" => {
                // Ignores its cancel token entirely.
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(ToolResult::completed())
            }
            "panic" => {
                ctx.output.delta("before").await;
                let v: Vec<u8> = Vec::new();
                #[allow(clippy::indexing_slicing)]
                let _ = v[usize::from(!ctx.tool_call_id.is_empty())];
                Ok(ToolResult::completed())
            }
            "error" => Err(ToolError::new("disk on fire")),
            "forward" => {
                ctx.output
                    .forward(protocol::with_origin(
                        protocol::user_text("child"),
                        "child-1",
                    ))
                    .await;
                ctx.output
                    .forward(protocol::user_text("no origin: dropped"))
                    .await;
                ctx.output.delta("parent").await;
                Ok(ToolResult::completed())
            }
            other => Err(ToolError::new(format!("unknown mode {other}"))),
        }
    }
}

fn scripted(timeout_ms: i64, max_output_length: i64) -> Arc<dyn Tool> {
    Arc::new(Scripted {
        def: ToolDefinitionConfig {
            name: "scripted".into(),
            description: "test tool".into(),
            parameters: Some(json!({
                "type": "object",
                "properties": {"mode": {"type": "string"}, "n": {"type": "integer", "minimum": 0}},
                "required": ["mode"],
                "additionalProperties": false
            })),
            permission: Permission::Read,
            for_model: None,
            timeout_ms,
            max_output_length,
        },
    })
}

struct Run {
    stream: Vec<OmniMessage>,
    output: crate::protocol::ToolCallOutputPayload,
}

async fn exec(env: &Environment, name: &str, args: &str, cancel: &CancellationToken) -> Run {
    let (tx, mut rx) = mpsc::channel(1024);
    let call = crate::protocol::ToolCallPayload {
        role: crate::protocol::Role::Assistant,
        name: name.into(),
        arguments: args.into(),
        tool_call_id: "call_7".into(),
        stop_reason: StopReason::Completed,
        fidelity: None,
    };
    let collector = tokio::spawn(async move {
        let mut v = Vec::new();
        while let Some(m) = rx.recv().await {
            v.push(m);
        }
        v
    });
    let output = env.execute_tool(&call, cancel, None, &tx).await;
    drop(tx);
    let stream = collector.await.unwrap_or_default();
    check_framing(&stream, &output);
    Run { stream, output }
}

/// start → deltas → stop → complete, joined deltas == complete, ids stamped by the Environment.
fn check_framing(stream: &[OmniMessage], output: &crate::protocol::ToolCallOutputPayload) {
    let own: Vec<&OmniMessage> = stream.iter().filter(|m| !m.has_origin()).collect();
    let first = own.first().and_then(|m| m.model());
    assert!(
        matches!(first, Some(ModelPayload::PartialToolCallOutput(p)) if p.event_type == crate::protocol::EventType::Start),
        "first message is start"
    );
    assert_eq!(
        own.last().and_then(|m| m.as_tool_call_output()),
        Some(output)
    );
    let mut agg = PartialAggregator::new();
    let folded: Vec<ModelPayload> = own[..own.len() - 1]
        .iter()
        .filter_map(|m| agg.push(m))
        .collect();
    assert_eq!(folded, vec![ModelPayload::ToolCallOutput(output.clone())]);
    for m in own {
        match m.model() {
            Some(ModelPayload::PartialToolCallOutput(p)) => assert_eq!(p.tool_call_id, "call_7"),
            Some(ModelPayload::ToolCallOutput(p)) => assert_eq!(p.tool_call_id, "call_7"),
            other => panic!("unexpected message in a tool stream: {other:?}"),
        }
    }
}

fn env(tool: Arc<dyn Tool>) -> Environment {
    Environment::with_tools("/tmp", vec![tool], ToolServices::default())
}

#[tokio::test]
async fn argument_problems_get_exact_texts() {
    let e = env(scripted(1000, 16_000));
    let never = CancellationToken::new();
    let table: Vec<(&str, &str, String)> = vec![
        ("nope", "{}", "Unknown tool: nope".into()),
        ("scripted", "", "Tool call \"scripted\" failed: the arguments field is empty. Re-issue the call with a complete JSON object.".into()),
        ("scripted", "  \n", "Tool call \"scripted\" failed: the arguments field is empty. Re-issue the call with a complete JSON object.".into()),
        ("scripted", "{\"mode\":", "Tool call \"scripted\" failed: the arguments are not valid JSON (EOF while parsing a value at line 1 column 8). Re-issue the call with one complete, valid JSON object.".into()),
        // Non-object JSON counts as {}, which then misses the required field.
        ("scripted", "[1,2]", "Missing required argument \"mode\" for scripted.".into()),
        ("scripted", "{}", "Missing required argument \"mode\" for scripted.".into()),
        ("scripted", "{\"mode\":\"echo\",\"nmode\":1}", "Tool call \"scripted\" failed: unexpected argument \"nmode\". Re-issue the call with only the arguments the tool's schema defines.".into()),
        ("scripted", "{\"mode\":\"echo\",\"n\":-1}", "Tool call \"scripted\" failed: argument \"n\" is invalid: -1 is less than the minimum of 0. Re-issue the call with arguments that match the tool's schema.".into()),
        ("scripted", "{\"mode\":5}", "Tool call \"scripted\" failed: argument \"mode\" is invalid: 5 is not of type \"string\". Re-issue the call with arguments that match the tool's schema.".into()),
    ];
    for (name, args, want) in table {
        let run = exec(&e, name, args, &never).await;
        assert_eq!(run.output.output, want, "{name} {args:?}");
        assert_eq!(
            run.output.stop_reason,
            StopReason::Failed,
            "{name} {args:?}"
        );
    }
}

#[tokio::test]
async fn a_normal_call_and_a_flood_are_closed_out() {
    let e = env(scripted(10_000, 250));
    let never = CancellationToken::new();
    let ok = exec(&e, "scripted", r#"{"mode":"echo"}"#, &never).await;
    assert_eq!(
        (ok.output.output.as_str(), ok.output.stop_reason),
        ("id=call_7", StopReason::Completed)
    );
    let flood = exec(&e, "scripted", r#"{"mode":"flood"}"#, &never).await;
    assert_eq!(
        flood.output.output,
        format!(
            "{}\n[output truncated: exceeded 250 chars]\n[exit code: 3]",
            "x".repeat(250)
        )
    );
    assert_eq!(flood.output.stop_reason, StopReason::Failed);
    // start + 3 content deltas (100+100+50) + notes + stop + complete: the rest was never sent.
    assert_eq!(flood.stream.len(), 7);
}

#[tokio::test]
async fn timeout_is_merged_with_the_user_signal() {
    let e = env(scripted(200, 16_000));
    let user = CancellationToken::new();
    let t = exec(&e, "scripted", r#"{"mode":"sleep"}"#, &user).await;
    assert_eq!(t.output.output, "waiting\n[tool timeout: exceeded 200ms]");
    assert_eq!(t.output.stop_reason, StopReason::Failed);

    let e = env(scripted(60_000, 16_000));
    let user = CancellationToken::new();
    let trigger = user.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        trigger.cancel();
    });
    let a = exec(&e, "scripted", r#"{"mode":"sleep"}"#, &user).await;
    assert_eq!(
        a.output.output,
        "waiting\n[interrupted: tool aborted by user]"
    );
    assert_eq!(a.output.stop_reason, StopReason::Aborted);
}

#[tokio::test]
async fn errors_and_panics_become_tool_errors() {
    let e = env(scripted(10_000, 16_000));
    let never = CancellationToken::new();
    let err = exec(&e, "scripted", r#"{"mode":"error"}"#, &never).await;
    assert_eq!(err.output.output, "[tool error] disk on fire");
    let p = exec(&e, "scripted", r#"{"mode":"panic"}"#, &never).await;
    assert!(
        p.output
            .output
            .starts_with("before\n[tool error] tool panicked: index out of bounds"),
        "{}",
        p.output.output
    );
    assert_eq!(p.output.stop_reason, StopReason::Failed);
    // The Environment is still usable after a panic.
    let ok = exec(&e, "scripted", r#"{"mode":"echo"}"#, &never).await;
    assert_eq!(ok.output.stop_reason, StopReason::Completed);
}

#[tokio::test(start_paused = true)]
async fn a_tool_that_ignores_cancellation_is_dropped_after_the_grace() {
    let e = env(scripted(1_000, 16_000));
    let never = CancellationToken::new();
    let s = exec(&e, "scripted", r#"{"mode":"stubborn"}"#, &never).await;
    assert_eq!(s.output.output, "[tool timeout: exceeded 1000ms]");
    assert_eq!(s.output.stop_reason, StopReason::Failed);
}

#[tokio::test]
async fn origin_tagged_messages_pass_through_untouched() {
    let e = env(scripted(10_000, 16_000));
    let never = CancellationToken::new();
    let f = exec(&e, "scripted", r#"{"mode":"forward"}"#, &never).await;
    let forwarded: Vec<&OmniMessage> = f.stream.iter().filter(|m| m.has_origin()).collect();
    assert_eq!(forwarded.len(), 1);
    assert_eq!(forwarded[0].origin, Some(vec!["child-1".to_owned()]));
    assert_eq!(f.output.output, "parent");
}

#[test]
fn offered_tools_follow_the_vision_flag() {
    let defs = crate::config::default_tool_definitions();
    let vision: Vec<String> = defs
        .iter()
        .filter(|d| d.offered_to(true))
        .map(|d| d.name.clone())
        .collect();
    let text: Vec<String> = defs
        .iter()
        .filter(|d| d.offered_to(false))
        .map(|d| d.name.clone())
        .collect();
    assert!(
        vision.contains(&"read_image".to_owned()) && !vision.contains(&"describe_image".to_owned())
    );
    assert!(
        text.contains(&"describe_image".to_owned()) && !text.contains(&"read_image".to_owned())
    );
    // Every default schema compiles.
    for d in defs {
        let schema = d.parameters.unwrap_or_default();
        assert!(jsonschema::validator_for(&schema).is_ok(), "{}", d.name);
    }
}

"""Runs end to end: streamed messages, the trace, real commands, input forms, session API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import penguin_harness as ph
from helpers import (
    ClientType,
    collect,
    complete,
    kind,
    last_payloads,
    model_for,
    payload,
    trace_line,
    trace_lines,
)
from penguin_harness.types import OmniMessage
from scripted_server import ScriptedServer, Status, exec_call, text, tool_calls


def check_trace(session: ph.Session, msgs: list[OmniMessage], prompts: list[str]) -> None:
    """The trace is the stream minus partials, with the prompts after session_meta, line for
    line and byte for byte (key order included)."""
    lines = trace_lines(session.trace_path)
    done = complete(msgs)
    assert done[0]["type"] == "session_meta"
    assert lines[0] == trace_line(done[0])
    assert [json.loads(line)["payload"] for line in lines[1 : 1 + len(prompts)]] == [
        {"type": "text", "role": "user", "text": p, "stop_reason": "completed"} for p in prompts
    ]
    assert lines[1 + len(prompts) :] == [trace_line(m) for m in done[1:]]


@pytest.mark.asyncio
@pytest.mark.parametrize("client_type", ["openai-chat", "anthropic-messages"])
async def test_text_answer_streams_and_is_traced(
    server: ScriptedServer, root: Path, workspace: Path, client_type: ClientType
) -> None:
    server.push(text("Héllo there ☃", thinking="let me think"))
    agent = ph.create_agent(root=root)
    with agent.create_session(workspace_dir=workspace, model=model_for(server, client_type)) as s:
        msgs = await collect(s.run("Say héllo"))
        assert [kind(m) for m in msgs] == [
            "session_meta",
            "request_begin",
            "partial_thinking/start",
            "partial_thinking/delta",
            "partial_thinking/delta",
            "partial_thinking/delta",
            "partial_thinking/stop",
            "thinking",
            "partial_text/start",
            "partial_text/delta",
            "partial_text/delta",
            "partial_text/delta",
            "partial_text/stop",
            "text",
            "token_usage",
            "request_end",
        ]
        deltas = "".join(str(payload(m)["text"]) for m in msgs if kind(m) == "partial_text/delta")
        assert deltas == "Héllo there ☃"
        assert last_payloads(msgs, "text") == [
            {
                "type": "text",
                "role": "assistant",
                "text": "Héllo there ☃",
                "stop_reason": "completed",
            }
        ]
        assert last_payloads(msgs, "request_end") == [
            {"type": "request_end", "status": "completed"}
        ]
        check_trace(s, msgs, ["Say héllo"])
        meta = payload(msgs[0])
        assert meta == s.meta
        assert (meta["session_id"], meta["provider"], meta["model_id"], meta["workspace"]) == (
            s.id,
            "scripted",
            "scripted-model",
            str(workspace.resolve()),
        )
    assert server.requests[0].path == (
        "/v1/chat/completions" if client_type == "openai-chat" else "/v1/messages"
    )


@pytest.mark.asyncio
async def test_full_task_with_real_commands(
    session: ph.Session, server: ScriptedServer, workspace: Path
) -> None:
    server.push(
        tool_calls(exec_call("c1", "printf 'hello\\n' > note.txt && cat note.txt")),
        tool_calls(exec_call("c2", "wc -c < note.txt"), exec_call("c3", "exit 3")),
        text("The note says hello."),
    )
    msgs = await collect(session.run("Write a note", approve=ph.approval.allow_all))

    outputs = last_payloads(msgs, "tool_call_output")
    assert outputs == [
        {
            "type": "tool_call_output",
            "role": "user",
            "output": "hello\n",
            "tool_call_id": "c1",
            "stop_reason": "completed",
        },
        *sorted(
            [
                {
                    "type": "tool_call_output",
                    "role": "user",
                    "output": "6\n",
                    "tool_call_id": "c2",
                    "stop_reason": "completed",
                },
                {
                    "type": "tool_call_output",
                    "role": "user",
                    "output": "[exit code: 3]",
                    "tool_call_id": "c3",
                    "stop_reason": "failed",
                },
            ],
            key=lambda o: [p["tool_call_id"] for p in outputs].index(o["tool_call_id"]),
        ),
    ]
    assert (workspace / "note.txt").read_text() == "hello\n"
    assert last_payloads(msgs, "approval_decision") == [
        {"type": "approval_decision", "decision": "allow", "tool_call_id": c}
        for c in ["c1", "c2", "c3"]
    ]
    # Three requests; every output reached the model before the next one.
    assert [kind(m) for m in msgs if kind(m) in ("request_begin", "request_end", "text")] == [
        "request_begin",
        "request_end",
        "request_begin",
        "request_end",
        "request_begin",
        "text",
        "request_end",
    ]
    assert len(server.requests) == 3
    tool_msgs = [
        (m["tool_call_id"], m["content"])
        for m in server.requests[2].body["messages"]
        if m["role"] == "tool"
    ]
    assert tool_msgs == [("c1", "hello\n"), ("c2", "6\n"), ("c3", "[exit code: 3]")]
    check_trace(session, msgs, ["Write a note"])


@pytest.mark.asyncio
async def test_input_forms(session: ph.Session, server: ScriptedServer) -> None:
    server.push(text("one"), text("two"), text("three"))
    await collect(session.run("plain string"))
    await collect(session.run(ph.user_text("a dict")))
    image = "data:image/png;base64,iVBORw0KGgo="
    await collect(session.run([ph.user_text("a list"), ph.user_image(image)]))
    sent = [r.body["messages"][-1]["content"] for r in server.requests]
    assert sent[0] == "plain string"
    assert sent[1] == "a dict"
    assert sent[2] == [
        {"type": "text", "text": "a list"},
        {"type": "image_url", "image_url": {"url": image}},
    ]


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        (42, "run input must be a string, a message dict or a list of message dicts, got int"),
        ([ph.user_text("ok"), "nope"], "message 1: expected an OmniMessage dict, got str"),
        ([{"type": "model_msg"}], "message 0: not a valid OmniMessage: missing field `timestamp`"),
    ],
)
def test_bad_input_is_a_message_error(session: ph.Session, messages: Any, error: str) -> None:
    with pytest.raises(ph.MessageError) as info:
        session.run(messages)
    assert str(info.value) == error


def test_non_input_messages_are_rejected(session: ph.Session) -> None:
    event = {
        "timestamp": "2026-01-01T00:00:00.000Z",
        "type": "event_msg",
        "payload": {"type": "request_begin"},
    }
    with pytest.raises(ph.MessageError) as info:
        session.run([ph.user_text("x"), event])  # type: ignore[list-item]
    assert str(info.value) == (
        "invalid run input: message 1 is an event_msg; a run takes complete model messages "
        "(user text, images, tool outputs)"
    )


def test_session_surface(session: ph.Session, workspace: Path, root: Path) -> None:
    assert session.workspace == workspace.resolve()
    assert session.id.startswith("session-")
    assert session.trace_path.name == f"{session.id}_001.jsonl"
    assert session.trace_path.is_relative_to(
        root / "default_project" / "agents" / "default_agent" / "traces"
    )
    # The six tools, minus describe_image: the inline model accepts images.
    assert [t["name"] for t in session.tools()] == [
        "exec_command",
        "input_command",
        "run_subagent",
        "input_subagent",
        "read_image",
    ]
    assert session.tools()[0]["parameters"]["required"] == ["cmd"]
    assert session.tool_permission("exec_command") == "rw"
    assert session.tool_permission("no_such_tool") is None
    assert session.skip_reconnect_wait() is False


@pytest.mark.asyncio
async def test_thinking_level_and_reconnect_skip(
    session: ph.Session, server: ScriptedServer
) -> None:
    server.push(Status(500, '{"error":{"message":"try again"}}'), text("recovered"))
    skipped = []
    async for m in session.run("hi", thinking_level="high"):
        p = payload(m)
        if p.get("type") == "request_end" and "retry_in_ms" in p:
            skipped.append(session.skip_reconnect_wait())
    assert skipped == [True]
    assert [r.body.get("reasoning_effort") for r in server.requests] == ["high", "high"]


def test_errors_share_one_root(server: ScriptedServer, root: Path, tmp_path: Path) -> None:
    agent = ph.create_agent(root=root)
    cases: list[tuple[Any, type[ph.HarnessError]]] = [
        (lambda: ph.create_agent("bad id", root=root), ph.ConfigError),
        (
            lambda: agent.create_session(
                workspace_dir=tmp_path / "missing", model=model_for(server)
            ),
            ph.WorkspaceError,
        ),
        (lambda: agent.create_session(model=ph.Model("p", "m", "ftp://x")), ph.ModelError),
        (lambda: agent.create_session(provider="p"), ph.ConfigError),
        (lambda: agent.create_session(), ph.ConfigError),
        (lambda: ph.Model("p", "m", client_type="gemini"), ph.ConfigError),  # type: ignore[arg-type]
        (
            lambda: agent.create_session(
                model=model_for(server),
                thinking_level="lots",  # type: ignore[arg-type]
            ),
            ph.InvalidArgumentError,
        ),
        (lambda: ph.read_trace(tmp_path / "nope.jsonl"), ph.TraceError),
    ]
    for make, error in cases:
        with pytest.raises(error) as info:
            make()
        assert isinstance(info.value, ph.HarnessError)
    with pytest.raises(ph.ConfigError) as bad_id:
        ph.create_agent("bad id", root=root)
    assert str(bad_id.value) == "invalid agent id \"bad id\": use letters, digits, '_' and '-' only"


@pytest.mark.asyncio
async def test_disposed_session_refuses_runs(session: ph.Session) -> None:
    session.dispose()
    session.dispose()  # idempotent
    with pytest.raises(ph.SessionDisposedError):
        await collect(session.run("hi"))


def test_iterating_outside_an_event_loop_is_a_usage_error(session: ph.Session) -> None:
    run = session.run("hi")
    with pytest.raises(ph.UsageError):
        run.__anext__()


def test_model_value() -> None:
    m = ph.Model("openai", "gpt-x", "https://example.invalid/v1", api_key="secret", max_tokens=10)
    assert (m.provider, m.model_id, m.base_url, m.api_key, m.client_type, m.vision) == (
        "openai",
        "gpt-x",
        "https://example.invalid/v1",
        "secret",
        "openai-chat",
        True,
    )
    assert (m.context_window, m.max_tokens) == (None, 10)
    assert "secret" not in repr(m)
    assert m == ph.Model(
        "openai", "gpt-x", "https://example.invalid/v1", api_key="secret", max_tokens=10
    )
    assert m != ph.Model("openai", "gpt-x")
    assert ph.Model("a", "b", client_type="ant-messages").client_type == "anthropic-messages"

"""Subagents and image tools seen from Python: origin-tagged child messages, the child's
tool call reaching the Python approver, the pointer in the parent trace, and the image tools
chosen by the model's vision flag."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

import penguin_harness as ph
from helpers import collect, model_for, payload
from penguin_harness.types import OmniMessage, ToolCallMessage
from scripted_server import Call, ScriptedServer, exec_call, text, tool_calls

#: A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGMAAQAABQABDQottAAAAABJRU5ErkJggg=="
)


def _output(msgs: list[OmniMessage], call_id: str) -> dict[str, Any]:
    for m in msgs:
        p = payload(m)
        is_output = p.get("type") == "tool_call_output" and p["tool_call_id"] == call_id
        if is_output and "origin" not in m:
            return p
    raise AssertionError(f"no output for {call_id}")


@pytest.mark.asyncio
async def test_a_child_session_runs_a_command_through_the_parent_approver(
    server: ScriptedServer, root: Path, workspace: Path
) -> None:
    server.push(
        tool_calls(Call("call_sub", "run_subagent", json.dumps({"prompt": "count the files"}))),
        tool_calls(exec_call("c1", "echo one > a.txt; ls | wc -l")),
        text("There is 1 file."),
        text("The child counted 1 file."),
    )
    seen: list[ToolCallMessage] = []

    async def approve(call: ToolCallMessage) -> str:
        seen.append(call)
        return "allow"

    agent = ph.create_agent(root=root)
    with agent.create_session(workspace_dir=workspace, model=model_for(server)) as session:
        msgs = await collect(session.run("delegate it", approve=approve))
        trace_path = session.trace_path

    # The child's messages came through tagged with its session id; its session_meta first.
    forwarded = [m for m in msgs if "origin" in m]
    assert forwarded, "no forwarded child messages"
    child_id = forwarded[0]["origin"][0]
    assert forwarded[0]["type"] == "session_meta"
    assert all(m["origin"] == [child_id] for m in forwarded)
    assert payload(forwarded[0])["source"] == "subagent"

    # Both calls passed the one Python approver: the parent's, then the child's (tagged).
    assert [(c["payload"]["name"], c.get("origin")) for c in seen] == [
        ("run_subagent", None),
        ("exec_command", [child_id]),
    ]
    # The tool output is the child's final answer; the command really ran in the shared workspace.
    out = _output(msgs, "call_sub")
    assert (out["output"], out["stop_reason"]) == ("There is 1 file.", "completed")
    assert (workspace / "a.txt").read_text() == "one\n"

    # The parent trace holds one pointer and none of the child's messages.
    parent = list(ph.read_trace(trace_path))
    pointers = [payload(m) for m in parent if payload(m).get("type") == "subagent"]
    assert pointers == [{"type": "subagent", "session_id": child_id}]
    assert not any("origin" in m for m in parent)
    # The child has its own trace, in the same agent's trace folder.
    child_traces = list(trace_path.parent.glob(f"{child_id}_001.jsonl"))
    assert len(child_traces) == 1
    child = list(ph.read_trace(child_traces[0]))
    assert payload(child[0])["session_id"] == child_id
    # The parent model's next request carries the child's answer, not its messages.
    last = json.dumps(server.requests[-1].body)
    assert "There is 1 file." in last and "ls | wc -l" not in last


@pytest.mark.asyncio
async def test_the_image_tool_follows_the_vision_flag(
    server: ScriptedServer, root: Path, workspace: Path
) -> None:
    (workspace / "dot.png").write_bytes(PNG)
    server.push(
        tool_calls(Call("i1", "read_image", json.dumps({"source": "dot.png"}))),
        text("A single pixel."),
    )
    agent = ph.create_agent(root=root)
    model = model_for(server)
    text_only = ph.Model(
        provider="scripted",
        model_id="scripted-model",
        base_url=server.openai_base_url,
        api_key="test-key",
        vision=False,
    )
    with agent.create_session(workspace_dir=workspace, model=text_only) as blind:
        names = [t["name"] for t in blind.tools()]
        assert "describe_image" in names and "read_image" not in names
        assert blind.tool_permission("describe_image") == "r"
    with agent.create_session(workspace_dir=workspace, model=model) as session:
        names = [t["name"] for t in session.tools()]
        assert "read_image" in names and "describe_image" not in names
        msgs = await collect(session.run("look at dot.png", approve=ph.approval.allow_all))
    out = _output(msgs, "i1")
    assert out["output"] == "image/png, 67 B"
    assert out["images"] == ["data:image/png;base64," + base64.b64encode(PNG).decode()]
    # The image reached the model in the next request.
    assert "data:image/png;base64,iVBOR" in json.dumps(server.requests[-1].body)

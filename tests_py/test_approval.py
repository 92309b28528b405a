"""Approval from Python: default deny, sync and async callables, failures, policies."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
from pathlib import Path
from typing import Any

import pytest

import penguin_harness as ph
from helpers import collect, kind, last_payloads, payload, trace_line, trace_lines
from penguin_harness.types import OmniMessage, ToolCallMessage
from scripted_server import Call, ScriptedServer, exec_call, text, tool_calls

pytestmark = pytest.mark.asyncio

DENIED = "Tool call denied by user."
EXPECTED = 'expected "allow", "deny", "forbidden", True or False'


def decisions(msgs: list[OmniMessage]) -> list[dict[str, Any]]:
    return last_payloads(msgs, "approval_decision")


def outputs(msgs: list[OmniMessage]) -> dict[str, tuple[str, str]]:
    return {
        str(p["tool_call_id"]): (str(p["output"]), str(p["stop_reason"]))
        for p in last_payloads(msgs, "tool_call_output")
    }


async def test_no_approver_denies(
    session: ph.Session, server: ScriptedServer, workspace: Path
) -> None:
    server.push(tool_calls(exec_call("c1", "touch made.txt")), text("ok"))
    msgs = await collect(session.run("go"))
    assert decisions(msgs) == [
        {"type": "approval_decision", "decision": "deny", "tool_call_id": "c1"}
    ]
    assert outputs(msgs) == {"c1": (DENIED, "aborted")}
    assert not (workspace / "made.txt").exists()


async def test_sync_and_async_callables_see_the_tool_call(
    session: ph.Session, server: ScriptedServer, workspace: Path
) -> None:
    seen: list[tuple[str, ToolCallMessage]] = []
    loop_thread = threading.get_ident()
    threads: set[int] = set()

    def sync_approve(call: ToolCallMessage) -> bool:
        threads.add(threading.get_ident())
        seen.append(("sync", call))
        return call["payload"]["tool_call_id"] == "c1"

    async def async_approve(call: ToolCallMessage) -> str:
        threads.add(threading.get_ident())
        await asyncio.sleep(0.01)
        seen.append(("async", call))
        return "allow" if call["payload"]["tool_call_id"] == "c3" else "deny"

    server.push(
        tool_calls(exec_call("c1", "echo one"), exec_call("c2", "touch two")),
        text("next"),
        tool_calls(exec_call("c3", "echo three"), exec_call("c4", "touch four")),
        text("done"),
    )
    first = await collect(session.run("go", approve=sync_approve))
    second = await collect(session.run("again", approve=async_approve))

    assert threads == {loop_thread}
    calls = [m for m in first + second if kind(m) == "tool_call"]
    assert [(who, c) for who, c in seen] == list(zip(["sync", "sync", "async", "async"], calls))
    assert [d["decision"] for d in decisions(first) + decisions(second)] == [
        "allow",
        "deny",
        "allow",
        "deny",
    ]
    assert outputs(first) == {"c1": ("one\n", "completed"), "c2": (DENIED, "aborted")}
    assert outputs(second) == {"c3": ("three\n", "completed"), "c4": (DENIED, "aborted")}
    assert not (workspace / "two").exists()
    assert not (workspace / "four").exists()


@pytest.mark.parametrize(
    ("approver", "reason"),
    [
        (lambda call: 1 / 0, "approval callback failed: ZeroDivisionError: division by zero"),
        (lambda call: "maybe", f"approval callback failed: returned 'maybe'; {EXPECTED}"),
        (lambda call: None, f"approval callback failed: returned None; {EXPECTED}"),
    ],
)
async def test_failing_sync_approver_denies_with_reason(
    session: ph.Session, server: ScriptedServer, approver: Any, reason: str
) -> None:
    server.push(tool_calls(exec_call("c1", "echo hi")), text("ok"))
    msgs = await collect(session.run("go", approve=approver))
    expected = {
        "type": "approval_decision",
        "decision": "deny",
        "tool_call_id": "c1",
        "error_message": reason,
    }
    assert decisions(msgs) == [expected]
    assert outputs(msgs) == {"c1": (DENIED, "aborted")}
    traced = [json.loads(line)["payload"] for line in trace_lines(session.trace_path)]
    assert expected in traced


async def test_failing_async_approver_denies_with_reason(
    session: ph.Session, server: ScriptedServer
) -> None:
    async def approve(call: ToolCallMessage) -> str:
        await asyncio.sleep(0)
        raise PermissionError("not on my watch")

    server.push(tool_calls(exec_call("c1", "echo hi")), text("ok"))
    msgs = await collect(session.run("go", approve=approve))
    assert decisions(msgs) == [
        {
            "type": "approval_decision",
            "decision": "deny",
            "tool_call_id": "c1",
            "error_message": "approval callback failed: PermissionError: not on my watch",
        }
    ]
    lines = trace_lines(session.trace_path)
    assert trace_line(next(m for m in msgs if kind(m) == "approval_decision")) in lines


async def test_approver_runs_in_the_consumers_context(
    session: ph.Session, server: ScriptedServer
) -> None:
    user: contextvars.ContextVar[str] = contextvars.ContextVar("user")
    user.set("ada")
    seen: list[str] = []

    async def approve(call: ToolCallMessage) -> bool:
        seen.append(user.get("nobody"))
        return False

    server.push(tool_calls(exec_call("c1", "true")), text("ok"))
    await collect(session.run("go", approve=approve))
    assert seen == ["ada"]


async def test_a_waiting_approver_leaves_the_loop_free(
    session: ph.Session, server: ScriptedServer
) -> None:
    # The approver waits for an event that only another task on the same loop sets: this
    # completes only if the loop keeps running while the approval is pending.
    released = asyncio.Event()
    asked = asyncio.Event()

    async def approve(call: ToolCallMessage) -> str:
        asked.set()
        await released.wait()
        return "allow"

    async def releaser() -> None:
        await asked.wait()
        released.set()

    server.push(tool_calls(exec_call("c1", "echo released")), text("ok"))
    helper = asyncio.ensure_future(releaser())
    msgs = await asyncio.wait_for(collect(session.run("go", approve=approve)), 60)
    await helper
    assert outputs(msgs) == {"c1": ("released\n", "completed")}


async def test_abandoned_approval_cancels_the_python_task(
    session: ph.Session, server: ScriptedServer
) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def approve(call: ToolCallMessage) -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "allow"

    server.push(tool_calls(exec_call("c1", "echo never")), text("unused"))
    run = session.run("go", approve=approve)
    async for m in run:
        if kind(m) == "tool_call":
            break
    await asyncio.wait_for(started.wait(), 60)
    await run.aclose()
    await asyncio.wait_for(cancelled.wait(), 60)
    traced = [json.loads(line)["payload"] for line in trace_lines(session.trace_path)[1:]]
    assert traced[-1] == {"type": "abort", "reason": "aborted by user"}
    assert "approval_decision" not in [p["type"] for p in traced]


async def test_composed_policy(
    session: ph.Session, server: ScriptedServer, workspace: Path
) -> None:
    asked: list[str] = []

    def ask(call: ToolCallMessage) -> str:
        asked.append(call["payload"]["tool_call_id"])
        return "deny"

    policy = ph.approval.first_match(
        ph.approval.forbid_commands(r"rm\s+-rf"),
        ph.approval.allow_commands(r"(echo|ls)( .*)?"),
        ph.approval.deny_tools("input_command"),
        ask,
    )
    server.push(
        tool_calls(
            exec_call("c1", "echo fine"),
            exec_call("c2", "echo x; rm -rf ."),
            exec_call("c3", "touch asked"),
            Call("c4", "input_command", json.dumps({"process_id": "proc-00000000"})),
            exec_call("c5", "ls; touch sneaky"),
        ),
        text("ok"),
    )
    msgs = await collect(session.run("go", approve=policy))
    assert [(d["tool_call_id"], d["decision"]) for d in decisions(msgs)] == [
        ("c1", "allow"),
        ("c2", "forbidden"),
        ("c3", "deny"),
        ("c4", "deny"),
        ("c5", "deny"),
    ]
    assert asked == ["c3", "c5"]
    assert outputs(msgs) == {
        "c1": ("fine\n", "completed"),
        "c2": ("Tool call denied by policy.", "aborted"),
        "c3": (DENIED, "aborted"),
        "c4": (DENIED, "aborted"),
        "c5": (DENIED, "aborted"),
    }
    assert sorted(p.name for p in workspace.iterdir()) == []


async def test_modes(session: ph.Session, server: ScriptedServer) -> None:
    asked: list[str] = []

    async def ask(call: ToolCallMessage) -> bool:
        asked.append(call["payload"]["name"])
        return True

    cases: list[tuple[ph.Policy, list[str]]] = [
        (ph.approval.allow_all, ["allow", "allow"]),
        (ph.approval.deny_all, ["deny", "deny"]),
        (ph.approval.mode("deny-all"), ["deny", "deny"]),
        # exec_command is "rw" and mystery_tool is unknown: read-only asks for both.
        (ph.approval.read_only(ask), ["allow", "allow"]),
        (ph.approval.always_ask(ask), ["allow", "allow"]),
        (ph.approval.when_permission("rw", ph.approval.allow_all), ["allow", "deny"]),
    ]
    for policy, expected in cases:
        server.push(
            tool_calls(exec_call("c1", "true"), Call("c2", "mystery_tool", "{}")),
            text("ok"),
        )
        msgs = await collect(session.run("go", approve=policy))
        assert [d["decision"] for d in decisions(msgs)] == expected, repr(policy)
    assert asked == ["exec_command", "mystery_tool"] * 2


async def test_policy_errors() -> None:
    with pytest.raises(ph.PolicyError, match='unknown approval mode "yolo"'):
        ph.approval.mode("yolo")
    with pytest.raises(ph.PolicyError, match="needs an `ask` callback"):
        ph.approval.mode("read-only")
    with pytest.raises(ph.PolicyError, match=r'invalid pattern "\(oops" for exec_command\.cmd'):
        ph.approval.allow_commands("(oops")
    with pytest.raises(ph.PolicyError, match='unknown permission "x"'):
        ph.approval.when_permission("x", ph.approval.allow_all)
    with pytest.raises(ph.InvalidArgumentError, match="expected a Policy or a callable"):
        ph.approval.first_match(42)  # type: ignore[arg-type]
    with pytest.raises(ph.InvalidArgumentError, match="unknown decision"):
        ph.Policy.decide("perhaps")  # type: ignore[arg-type]
    assert repr(
        ph.approval.first_match(ph.approval.allow_commands(r"ls\s*"), ph.approval.deny_all)
    ) == (r"Policy(first_match(when(exec_command.cmd matches /ls\s*/, allow), deny))")


async def test_approve_must_be_a_policy_or_callable(session: ph.Session) -> None:
    with pytest.raises(ph.InvalidArgumentError):
        session.run("go", approve="allow")  # type: ignore[arg-type]


async def test_payload_helper_is_whole(session: ph.Session, server: ScriptedServer) -> None:
    server.push(tool_calls(exec_call("c1", "true")), text("ok"))
    msgs = await collect(session.run("go", approve=ph.approval.allow_all))
    call = [payload(m) for m in msgs if kind(m) == "tool_call"]
    assert call == [
        {
            "type": "tool_call",
            "role": "assistant",
            "name": "exec_command",
            "arguments": '{"cmd": "true"}',
            "tool_call_id": "c1",
            "stop_reason": "completed",
        }
    ]

"""Leaving a run early: ``break``, task cancellation, ``aclose()``, ``abort()``, ``async with``.

Each case starts a real command that records its shell's and its child's pids and then
sleeps; after the run is left, both processes must be gone, the trace must end with the
``abort`` event, and the next run must send the carry-over (the interrupted output) first.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

import penguin_harness as ph
from helpers import collect, kind, last_payloads, payload, trace_lines
from penguin_harness.types import OmniMessage
from scripted_server import ScriptedServer, exec_call, text, tool_calls

pytestmark = pytest.mark.asyncio

SLEEPER = "echo $$ > shell.pid; sleep 30 & echo $! > sleep.pid; echo started; wait"
INTERRUPTED = "started\n\n[interrupted: tool aborted by user]"
ABORT = {"type": "abort", "reason": "aborted by user"}


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs. A zombie waiting for init to reap it counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


async def gone(procs: list[int]) -> list[bool]:
    """Waits (up to a hang guard) until none of ``procs`` runs; returns which are gone. The
    group gets its signal when the run ends; a child may need a moment to act on it."""
    for _ in range(500):
        if not any(alive(p) for p in procs):
            break
        await asyncio.sleep(0.02)
    return [not alive(p) for p in procs]


def pids(workspace: Path) -> list[int]:
    return [int((workspace / f).read_text()) for f in ("shell.pid", "sleep.pid")]


def is_started(msg: OmniMessage) -> bool:
    return kind(msg) == "partial_tool_call_output/delta" and "started" in str(
        payload(msg)["output"]
    )


def trace_tail(session: ph.Session) -> object:
    return json.loads(trace_lines(session.trace_path)[-1])["payload"]


async def next_run_gets_carry_over(session: ph.Session, server: ScriptedServer) -> None:
    """Runs a follow-up and checks what it sent: the interrupted output, then the new text."""
    msgs = await collect(session.run("what happened?"))
    assert last_payloads(msgs, "text")[-1]["text"] == "after"
    sent = server.requests[-1].body["messages"]
    assert [(m["role"], m.get("tool_call_id"), m["content"]) for m in sent[-2:]] == [
        ("tool", "c1", INTERRUPTED),
        ("user", None, "what happened?"),
    ]


@pytest.fixture
def sleeper(server: ScriptedServer) -> ScriptedServer:
    server.push(tool_calls(exec_call("c1", SLEEPER)), text("after"))
    return server


async def test_break_aborts_and_kills(
    session: ph.Session, sleeper: ScriptedServer, workspace: Path
) -> None:
    async for msg in session.run("sleep", approve=ph.approval.allow_all):
        if is_started(msg):
            break
    procs = pids(workspace)
    # Runs of a session are serialized: the follow-up starts once the aborted run ended.
    await next_run_gets_carry_over(session, sleeper)
    assert await gone(procs) == [True, True]
    lines = [json.loads(line)["payload"] for line in trace_lines(session.trace_path)[1:]]
    assert ABORT in lines


async def test_task_cancel_aborts_and_kills(
    session: ph.Session, sleeper: ScriptedServer, workspace: Path
) -> None:
    started = asyncio.Event()

    async def consume() -> None:
        async for msg in session.run("sleep", approve=ph.approval.allow_all):
            if is_started(msg):
                started.set()

    task = asyncio.ensure_future(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    procs = pids(workspace)
    await next_run_gets_carry_over(session, sleeper)
    assert await gone(procs) == [True, True]


async def test_aclose_returns_after_the_run_ended(
    session: ph.Session, sleeper: ScriptedServer, workspace: Path
) -> None:
    run = session.run("sleep", approve=ph.approval.allow_all)
    async for msg in run:
        if is_started(msg):
            break
    await run.aclose()
    assert await gone(pids(workspace)) == [True, True]
    assert trace_tail(session) == ABORT
    with pytest.raises(StopAsyncIteration):
        await run.__anext__()
    await run.aclose()  # idempotent
    await next_run_gets_carry_over(session, sleeper)


async def test_abort_lets_the_caller_read_to_the_end(
    session: ph.Session, sleeper: ScriptedServer, workspace: Path
) -> None:
    run = session.run("sleep", approve=ph.approval.allow_all)
    rest: list[OmniMessage] = []
    async for msg in run:
        if is_started(msg):
            run.abort()
        rest.append(msg)
    assert payload(rest[-1]) == ABORT
    assert [p["output"] for p in last_payloads(rest, "tool_call_output")] == [INTERRUPTED]
    assert await gone(pids(workspace)) == [True, True]
    await next_run_gets_carry_over(session, sleeper)


async def test_async_with_closes_the_run(
    session: ph.Session, sleeper: ScriptedServer, workspace: Path
) -> None:
    async with session.run("sleep", approve=ph.approval.allow_all) as run:
        async for msg in run:
            if is_started(msg):
                break
    assert await gone(pids(workspace)) == [True, True]
    assert trace_tail(session) == ABORT
    await next_run_gets_carry_over(session, sleeper)


async def test_a_run_never_iterated_sends_nothing(
    session: ph.Session, server: ScriptedServer
) -> None:
    run = session.run("never")
    del run
    server.push(text("after"))
    msgs = await collect(session.run("hello"))
    assert last_payloads(msgs, "text")[-1]["text"] == "after"
    assert len(server.requests) == 1
    assert server.requests[0].body["messages"][-1] == {"role": "user", "content": "hello"}

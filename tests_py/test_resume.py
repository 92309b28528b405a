"""Resuming sessions (SPEC §4): from the command line after the process was killed mid-task,
the latest or a named session, errors; and ``Agent.resume_session`` /
``Agent.latest_session_id`` from Python."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import penguin_harness as ph
from cli_support import (
    Cli,
    kinds,
    messages_sent,
    reaped,
    session_line,
    trace_records,
    wait_for,
)
from helpers import collect, model_for
from scripted_server import ScriptedServer, exec_call, text, tool_calls

EXITED = "[interrupted: process exited before the tool finished]"
#: Usage of one scripted OpenAI request as the core counts it (cache_read + uncached + output).
TOKENS_PER_REQUEST = 4 + 16 + 8


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli.create(tmp_path)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def assert_paired(messages: list[dict[str, Any]]) -> None:
    """Every tool call of a Chat Completions history is answered, in order, before the next
    assistant or user message, and every tool message answers one."""
    open_calls: list[str] = []
    for m in messages:
        if m["role"] == "tool":
            assert open_calls and m["tool_call_id"] == open_calls.pop(0), (m, open_calls)
        else:
            assert open_calls == [], (m, open_calls)
            open_calls = [c["id"] for c in m.get("tool_calls") or []]
    assert open_calls == []


def committed_request_end(path: Path) -> bool:
    return any(
        m["type"] == "event_msg"
        and m["payload"]["type"] == "request_end"
        and m["payload"]["status"] == "completed"
        for m in ph.read_trace(path)
    )


def test_a_killed_run_resumes_and_finishes(cli: Cli, server: ScriptedServer) -> None:
    cli.add_model(server)
    server.push(
        tool_calls(exec_call("c1", "echo $$ > pid; exec sleep 30"), text_before="Sleeping.")
    )
    pid_file = cli.workspace / "pid"
    with reaped(pid_file):
        proc = cli.start("run", "-m", "sleepy")
        proc.wait_stderr("the session line", lambda err: "\n" in err)
        sid = session_line(proc.stderr)[1]
        wait_for("the command to start", lambda: pid_file.exists() and pid_file.read_text() != "")
        trace = cli.trace_of(sid)
        # Kill once the request is committed, so the call is one the model made for sure.
        wait_for("the committed request", lambda: committed_request_end(trace))
        proc.p.kill()
        assert proc.finish()[0] == -9
        before = trace.read_text().splitlines()

        server.push(text("Finished."))
        out = cli.run("run", "--resume", sid, "-m", "continue")
    assert (out.returncode, out.stdout) == (0, "Finished.\n")
    assert session_line(out.stderr)[:3] == ("resumed session", sid, "scripted/scripted-model")

    sent = messages_sent(server.requests[1])
    assert sent == [
        {"role": "user", "content": "sleepy"},
        {
            "role": "assistant",
            "content": "Sleeping.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {
                        "name": "exec_command",
                        "arguments": json.dumps({"cmd": "echo $$ > pid; exec sleep 30"}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": EXITED},
        {"role": "user", "content": "continue"},
    ]
    assert_paired(sent)

    # The same file keeps growing; the placeholder is model-only, never traced.
    assert cli.trace_files() == [trace]
    after = trace.read_text().splitlines()
    assert after[: len(before)] == before and len(after) > len(before)
    records = trace_records(trace)
    assert records[0]["type"] == "session_meta" and records[0]["payload"]["session_id"] == sid
    added = records[len(before) :]
    assert kinds(added) == ["text", "request_begin", "text", "token_usage", "request_end"]
    assert added[0]["payload"]["text"] == "continue"
    # Token counters continue from the trace.
    assert added[3]["payload"]["session"]["total"] == 2 * TOKENS_PER_REQUEST


def test_resume_without_an_id_takes_the_latest_session(cli: Cli, server: ScriptedServer) -> None:
    cli.add_model(server)
    server.push(text("a"), text("b"))
    first = session_line(cli.run("run", "-m", "one").stderr)[1]
    second = session_line(cli.run("run", "-m", "two").stderr)[1]
    assert first != second

    server.push(text("c"))
    out = cli.run("run", "--resume", "-m", "three")
    assert (out.returncode, out.stdout) == (0, "c\n")
    assert session_line(out.stderr)[:2] == ("resumed session", second)
    assert messages_sent(server.requests[2]) == [
        {"role": "user", "content": "two"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "three"},
    ]

    # A named session, even an older one.
    server.push(text("d"))
    out = cli.run("run", "--resume", first, "-m", "four")
    assert session_line(out.stderr)[:2] == ("resumed session", first)
    assert messages_sent(server.requests[3]) == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "four"},
    ]
    # It was written last, so it is now the latest.
    server.push(text("e"))
    out = cli.run("chat", "--resume", stdin="five\n")
    assert (out.returncode, out.stdout) == (0, "e\n")
    assert session_line(out.stderr)[:2] == ("resumed session", first)
    assert [m["content"] for m in messages_sent(server.requests[4])] == [
        "one",
        "a",
        "four",
        "d",
        "five",
    ]


def test_resume_errors(cli: Cli, server: ScriptedServer) -> None:
    cli.add_model(server)
    out = cli.run("run", "--resume", "-m", "x")
    assert (out.returncode, out.stderr) == (
        2,
        "penguin: error: no session to resume: agent default_agent of project "
        "default_project has none yet\n",
    )
    unknown = "session-2020-01-01-00-00-00-deadbeef"
    out = cli.run("run", "--resume", unknown, "-m", "x")
    assert (out.returncode, out.stderr) == (
        2,
        f"penguin: error: session {unknown} not found in this agent's traces\n",
    )
    out = cli.run("chat", "--resume", "--workspace", str(cli.workspace))
    assert (out.returncode, out.stderr) == (
        2,
        "penguin: error: --workspace cannot be used with --resume: a session keeps its workspace\n",
    )
    assert server.requests == []


@pytest.mark.asyncio
async def test_resume_session_from_python(
    server: ScriptedServer, root: Path, workspace: Path
) -> None:
    agent = ph.create_agent(root=root)
    assert agent.latest_session_id() is None
    model = model_for(server)
    server.push(tool_calls(exec_call("c1", "echo hi")), text("first done"))
    with agent.create_session(workspace_dir=workspace, model=model) as session:
        await collect(session.run("one", approve=ph.approval.allow_all))
        sid, trace = session.id, session.trace_path
    assert agent.latest_session_id() == sid

    # The inline model is not in the project config: it has to be given again.
    with pytest.raises(ph.ResumeError) as err:
        agent.resume_session(sid)
    assert str(err.value) == (
        f"cannot resume session {sid}: model scripted/scripted-model is not configured in "
        "this project"
    )
    with pytest.raises(ph.SessionNotFoundError):
        agent.resume_session("session-2020-01-01-00-00-00-00000000")
    with pytest.raises(ph.InvalidArgumentError):
        agent.resume_session(sid, model=model, thinking_level="lots")  # type: ignore[arg-type]

    # A crash mid-write leaves a torn last line; resuming tolerates and heals it.
    with trace.open("a") as f:
        f.write('{"timestamp":"2026-01-01T00:00:00Z","type":"event_m')
    lines_before = len(trace.read_text().splitlines())
    server.push(text("second done"))
    with agent.resume_session(sid, model=model) as resumed:
        assert (resumed.id, resumed.trace_path, resumed.workspace) == (
            sid,
            trace,
            workspace.resolve(),
        )
        msgs = await collect(resumed.run("two"))
    assert [m["payload"]["type"] for m in msgs if m["type"] != "session_meta"][-1] == (
        "request_end"
    )
    sent = messages_sent(server.requests[2])
    assert [(m["role"], m.get("content")) for m in sent] == [
        ("user", "one"),
        ("assistant", None),
        ("tool", "hi\n"),
        ("assistant", "first done"),
        ("user", "two"),
    ]
    assert_paired(sent)
    lines = trace.read_text().splitlines()
    assert lines[lines_before - 1].endswith('"type":"event_m')  # kept, on a line of its own
    added = [json.loads(line) for line in lines[lines_before:]]
    assert kinds(added) == ["text", "request_begin", "text", "token_usage", "request_end"]
    assert agent.latest_session_id() == sid

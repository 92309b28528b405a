"""``read_trace``: the trace's messages as dicts; a torn last line is tolerated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import penguin_harness as ph
from helpers import collect, trace_line
from scripted_server import ScriptedServer, text


@pytest.mark.asyncio
async def test_read_trace_round_trips_the_file(session: ph.Session, server: ScriptedServer) -> None:
    server.push(text("hi"))
    await collect(session.run("hello"))
    lines = session.trace_path.read_text().splitlines()
    messages = list(ph.read_trace(session.trace_path))
    assert [trace_line(m) for m in messages] == lines
    assert [json.loads(line) for line in lines] == messages


def test_torn_last_line_and_bad_middle_lines(tmp_path: Path) -> None:
    first = ph.user_text("first")
    second = ph.user_text("second")
    path = tmp_path / "t_001.jsonl"
    path.write_text(
        f"{trace_line(first)}\nnot json\n{trace_line(second)}\n" + '{"timestamp":"2026-'
    )
    reader = ph.read_trace(path)
    assert iter(reader) is reader
    assert list(reader) == [first, second]
    assert list(reader) == []


def test_missing_trace_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(ph.TraceError, match="cannot read trace"):
        ph.read_trace(tmp_path / "missing.jsonl")

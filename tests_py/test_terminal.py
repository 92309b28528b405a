"""The command line's terminal plumbing and rendering helpers: interruptible stdin lines, the
console holding output back while a prompt is open, compact previews."""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path

import pytest

from penguin_harness._terminal import INTERRUPTED, MAX_LINE_BYTES, Console, LineReader
from penguin_harness.cli import compact_arguments, preview_output


@pytest.mark.asyncio
async def test_lines_from_a_pipe_split_across_writes() -> None:
    r, w = os.pipe()
    reader = LineReader(r)
    try:
        os.write(w, b"one\r\ntw")
        assert await reader.readline() == "one"
        pending = asyncio.ensure_future(reader.readline())
        await asyncio.sleep(0)
        assert not pending.done()
        os.write(w, "o \u00e9\nthree".encode())
        assert await pending == "two \u00e9"
        os.close(w)
        w = -1
        assert await reader.readline() == "three"  # the last line needs no newline
        assert await reader.readline() is None
        assert await reader.readline() is None
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


@pytest.mark.asyncio
async def test_an_interrupted_read_loses_nothing() -> None:
    r, w = os.pipe()
    reader = LineReader(r)
    try:
        assert reader.interrupt() is False  # nothing pending
        pending = asyncio.ensure_future(reader.readline())
        await asyncio.sleep(0)
        assert reader.interrupt() is True
        assert await pending is INTERRUPTED
        os.write(w, b"kept\n")
        assert await reader.readline() == "kept"
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.asyncio
async def test_files_are_read_without_polling_and_long_lines_are_cut(tmp_path: Path) -> None:
    path = tmp_path / "input"
    path.write_bytes(b"x" * (MAX_LINE_BYTES + 10) + b"\nlast\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        reader = LineReader(fd)
        assert await reader.readline() == "x" * MAX_LINE_BYTES
        assert await reader.readline() == "x" * 10
        assert await reader.readline() == "last"
        assert await reader.readline() is None
    finally:
        os.close(fd)


def test_output_waits_while_a_prompt_is_open() -> None:
    out, err = io.StringIO(), io.StringIO()
    c = Console(out, err)
    c.text("answer")
    c.end_text()
    c.prompt("? allow x? [Y/n] ")
    c.line("meanwhile")
    c.text("more")
    c.end_text()
    assert err.getvalue() == "? allow x? [Y/n] "
    c.answered("y → allow")
    c.line("after")
    assert (out.getvalue(), err.getvalue()) == (
        "answer\nmore\n",
        "? allow x? [Y/n] y → allow\nmeanwhile\nafter\n",
    )


@pytest.mark.parametrize(
    ("output", "shown"),
    [
        ("", [""]),
        ("one\n", ["one"]),
        ("1\n2\n3\n4\n5\n", ["1", "2", "3", "4", "… 1 more line"]),
        ("1\n2\n3\n4\n5\n6\n7", ["1", "2", "3", "4", "… 3 more lines"]),
        ("crlf\r\n\x1b[31mred\x1b[0m\tok\n", ["crlf", "\\x1b[31mred\\x1b[0m\tok"]),
        ("y" * 200, ["y" * 159 + "…"]),
    ],
)
def test_output_previews(output: str, shown: list[str]) -> None:
    assert preview_output(output) == shown


@pytest.mark.parametrize(
    ("arguments", "shown"),
    [
        ('{"cmd": "ls -la", "yield_time_ms": 500}', 'cmd="ls -la", yield_time_ms=500'),
        ('{"chars": "\\u0003"}', 'chars="\\u0003"'),
        ('{"cmd": "' + "z" * 100 + '"}', 'cmd="' + "z" * 78 + "…"),
        ("not json\nat all", "not json\\nat all"),
        ("[1, 2]", "[1, 2]"),
    ],
)
def test_compact_arguments(arguments: str, shown: str) -> None:
    assert compact_arguments(arguments) == shown

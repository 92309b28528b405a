"""Interpreter exit: many short scripts that use the harness and exit must all exit cleanly.

A crash during finalization only shows up in some runs, so this runs 200 interpreters
(four kinds of script, several at a time) and checks every one: exit status 0, no signal,
nothing on stderr.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scripted_server import ScriptedServer, exec_call, text, tool_calls

#: Interpreters started in total.
RUNS = 200
#: Interpreters running at once (the machines have two cores; most time is spent waiting).
PARALLEL = 6

SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    import penguin_harness as ph

    kind, base_url, root = sys.argv[1:4]

    async def never(call):
        await asyncio.Event().wait()

    async def main():
        agent = ph.create_agent(root=root)
        session = agent.create_session(model=ph.Model("scripted", "m", base_url, api_key="k"))
        if kind == "idle":
            return
        if kind == "full":
            async for msg in session.run("hi", approve=ph.approval.allow_all):
                pass
            return
        approve = never if kind == "pending" else ph.approval.allow_all
        async for msg in session.run("go", approve=approve):
            if kind == "pending" and msg["payload"].get("type") == "tool_call":
                break
            if kind == "running" and msg["payload"].get("type") == "partial_tool_call_output":
                break

    asyncio.run(main())
    """
)


def test_many_interpreters_exit_cleanly(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    kinds = ["full", "idle", "pending", "running"]
    with (
        ScriptedServer(repeat=text("ok")) as texts,
        ScriptedServer(repeat=tool_calls(exec_call("c1", "echo started; sleep 5"))) as calls,
    ):

        def one(i: int) -> tuple[str, int, str]:
            kind = kinds[i % len(kinds)]
            server = texts if kind == "full" else calls
            out = subprocess.run(
                [
                    sys.executable,
                    str(script),
                    kind,
                    server.openai_base_url,
                    str(tmp_path / f"root{i % PARALLEL}"),
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
            return kind, out.returncode, out.stderr

        with ThreadPoolExecutor(PARALLEL) as pool:
            results = list(pool.map(one, range(RUNS)))
    failures = [r for r in results if r[1] != 0 or r[2] != ""]
    assert failures == []
    assert len(results) == RUNS

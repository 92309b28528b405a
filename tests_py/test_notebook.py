"""The quickstart notebook runs top to bottom in a real Jupyter kernel (top-level ``await``)
against a scripted server, and is committed without outputs."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from scripted_server import ScriptedServer, exec_call, text, tool_calls

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "quickstart.ipynb"
WRITE = "printf 'hello from the notebook\\n' > greeting.txt"


def test_notebook_is_committed_without_outputs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)  # type: ignore[no-untyped-call]
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert len(code) == 5
    assert [(c.outputs, c.execution_count) for c in code] == [([], None)] * len(code)


def test_quickstart_executes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = [
        tool_calls(exec_call("c1", WRITE), exec_call("c2", "rm -rf .")),
        tool_calls(exec_call("c3", "cat greeting.txt")),
        text("I wrote greeting.txt."),
    ]
    data = tmp_path / "data"
    with ScriptedServer(script) as server:
        monkeypatch.setenv("PENGUIN_QUICKSTART_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("PENGUIN_QUICKSTART_API_KEY", "test-key")
        monkeypatch.setenv("PENGUIN_HOME", str(data))
        nb = nbformat.read(NOTEBOOK, as_version=4)  # type: ignore[no-untyped-call]
        client = NotebookClient(
            nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
        )
        client.execute()
        assert (server.remaining, len(server.requests)) == (0, 3)
        assert all(r.headers["authorization"] == "Bearer test-key" for r in server.requests)

    code = [c for c in nb.cells if c.cell_type == "code"]

    def stdout(i: int) -> str:
        return "".join(o["text"] for o in code[i].outputs if o["output_type"] == "stream")

    setup = stdout(0).splitlines()
    workspace = Path(setup[0].removeprefix("workspace: "))
    assert workspace.parent == data / "default_project" / "agents" / "default_agent" / "workspaces"
    assert setup[1] == (
        "tools: ['exec_command', 'input_command', 'run_subagent', 'input_subagent', 'read_image']"
    )

    # Tool outputs arrive in completion order, so compare the run's lines as a multiset.
    assert Counter(stdout(2).splitlines()) == Counter(
        [
            f"asked about: {WRITE}",
            "",
            f"$ {WRITE}",
            "  approval: allow",
            "",
            "$ rm -rf .",
            "  approval: forbidden",
            "  | Tool call denied by policy.",
            "  | [no output]",
            "",
            "$ cat greeting.txt",
            "  approval: allow",
            "  | hello from the notebook",
            "",
            "I wrote greeting.txt.",
        ]
    )
    trace_rows = stdout(3).splitlines()
    trace_path = next(
        (data / "default_project" / "agents" / "default_agent" / "traces").rglob("*.jsonl")
    )
    assert trace_rows[0] == trace_path.name
    traced = [json.loads(line) for line in trace_path.read_text().splitlines()]
    assert [r.split(" ")[0] for r in trace_rows[1:]] == [m["type"] for m in traced]
    decisions = [
        m["payload"]["decision"] for m in traced if m["payload"].get("type") == "approval_decision"
    ]
    assert decisions == ["allow", "forbidden", "allow"]
    assert stdout(4) == "hello from the notebook\n\n"
    assert (workspace / "greeting.txt").read_text() == "hello from the notebook\n"

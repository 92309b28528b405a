"""The ``penguin`` command line, run as a subprocess against the scripted model server:
streaming, the approval modes and the interactive prompt, exit codes, Ctrl-C and chat."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_support import (
    Cli,
    messages_sent,
    process_gone,
    reaped,
    session_line,
    trace_records,
    wait_for,
)
from scripted_server import Call, ScriptedServer, Status, exec_call, text, tool_calls

#: Usage of one scripted OpenAI request as the core counts it (cache_read + uncached + output).
TOKENS_PER_REQUEST = 4 + 16 + 8
#: A minimal PNG: the signature is what read_image checks.
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli.create(tmp_path)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def configured(cli: Cli, server: ScriptedServer) -> Cli:
    cli.add_model(server)
    return cli


def decisions(cli: Cli, session_id: str) -> dict[str, str]:
    return {
        r["payload"]["tool_call_id"]: r["payload"]["decision"]
        for r in trace_records(cli.trace_of(session_id))
        if r["type"] == "event_msg" and r["payload"]["type"] == "approval_decision"
    }


def test_run_streams_the_answer_and_shows_calls_compactly(cli: Cli, server: ScriptedServer) -> None:
    configured(cli, server)
    server.push(tool_calls(exec_call("c1", "seq 1 6"), text_before="Counting."), text("Six."))
    out = cli.run("run", "-m", "count to six")
    assert (out.returncode, out.stdout) == (0, "Counting.\nSix.\n")
    how, sid, model, ws = session_line(out.stderr)
    assert (how, model, Path(ws)) == ("session", "scripted/scripted-model", cli.workspace)
    assert out.stderr.splitlines()[1:] == [
        '» exec_command(cmd="seq 1 6")',
        "  ⎿ 1",
        "    2",
        "    3",
        "    4",
        "    … 2 more lines",
        f"✓ done · {2 * TOKENS_PER_REQUEST} session tokens",
    ]
    # The session's trace holds the task.
    assert [m["content"] for m in messages_sent(server.requests[0])] == ["count to six"]
    assert trace_records(cli.trace_of(sid))[0]["payload"]["session_id"] == sid


def test_a_failed_command_shows_its_stop_reason(cli: Cli, server: ScriptedServer) -> None:
    configured(cli, server)
    server.push(tool_calls(exec_call("c1", "echo oops; exit 3")), text("It failed."))
    out = cli.run("run", "-m", "fail")
    assert out.returncode == 0
    assert out.stderr.splitlines()[1:] == [
        '» exec_command(cmd="echo oops; exit 3")',
        "  ⎿ oops",
        "    ",
        "    [exit code: 3]",
        "    [failed]",
        f"✓ done · {2 * TOKENS_PER_REQUEST} session tokens",
    ]


def test_deny_all_denies_without_asking(cli: Cli, server: ScriptedServer) -> None:
    configured(cli, server)
    server.push(tool_calls(exec_call("c1", "touch made")), text("Denied."))
    out = cli.run("run", "-m", "make it", "--approve", "deny-all", stdin="y\n")
    assert (out.returncode, out.stdout) == (0, "Denied.\n")
    assert out.stderr.splitlines()[1:] == [
        '» exec_command(cmd="touch made")',
        "  ⎿ Tool call denied by user.",
        "    [aborted]",
        f"✓ done · {2 * TOKENS_PER_REQUEST} session tokens",
    ]
    assert not (cli.workspace / "made").exists()
    assert decisions(cli, session_line(out.stderr)[1]) == {"c1": "deny"}


def test_read_only_asks_only_for_tools_that_write(cli: Cli, server: ScriptedServer) -> None:
    configured(cli, server)
    (cli.workspace / "pic.png").write_bytes(PNG)
    server.push(
        tool_calls(
            Call("c1", "read_image", '{"source": "pic.png"}'), exec_call("c2", "touch made")
        ),
        text("Looked."),
    )
    out = cli.run("run", "-m", "look", "--approve", "read-only", stdin="n\n")
    assert out.returncode == 0
    prompts = [line for line in out.stderr.splitlines() if line.startswith("? allow")]
    assert prompts == ['? allow exec_command(cmd="touch made")? [Y/n] n → deny']
    assert '» read_image(source="pic.png")' in out.stderr.splitlines()
    assert decisions(cli, session_line(out.stderr)[1]) == {"c1": "allow", "c2": "deny"}
    assert not (cli.workspace / "made").exists()


@pytest.mark.parametrize(
    ("stdin", "shown", "decision"),
    [
        ("y\n", "y → allow", "allow"),
        ("n\n", "n → deny", "deny"),
        ("No\n", "No → deny", "deny"),
        ("\n", " → allow", "allow"),
        ("sure\n", "sure → allow", "allow"),
        ("", "denied (end of input)", "deny"),
    ],
)
def test_always_ask_prompts_and_reads_the_answer(
    cli: Cli, server: ScriptedServer, stdin: str, shown: str, decision: str
) -> None:
    configured(cli, server)
    server.push(tool_calls(exec_call("c1", "touch made")), text("Asked."))
    out = cli.run("run", "-m", "make it", "--approve", "always-ask", stdin=stdin)
    assert out.returncode == 0
    lines = out.stderr.splitlines()[1:]
    assert lines[0] == f'? allow exec_command(cmd="touch made")? [Y/n] {shown}'
    assert decisions(cli, session_line(out.stderr)[1]) == {"c1": decision}
    assert (cli.workspace / "made").exists() == (decision == "allow")
    if decision == "deny":
        assert lines[1:3] == ["  ⎿ Tool call denied by user.", "    [aborted]"]


def test_a_task_that_ends_in_abort_exits_1(cli: Cli, server: ScriptedServer) -> None:
    configured(cli, server)
    body = '{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}'
    server.push(Status(401, body))
    out = cli.run("run", "-m", "hi")
    assert (out.returncode, out.stdout) == (1, "")
    reason = "HTTP 401: invalid_request_error/invalid_api_key: bad key"
    assert out.stderr.splitlines()[1:] == [
        f"! model request auth (attempt 1): {reason}",
        f"✗ aborted: llm request error: {reason}",
    ]


def test_exhausted_reconnects_exit_1(cli: Cli) -> None:
    with ScriptedServer(repeat=Status(503, '{"error":{"message":"busy"}}')) as server:
        configured(cli, server)
        out = cli.run("run", "-m", "hi")
        assert out.returncode == 1
        assert len(server.requests) == 3  # the first attempt and two retries (SYSTEM_YAML)
    assert out.stderr.splitlines()[1:] == [
        "! model request timeout (attempt 1): HTTP 503: busy; retrying in 0.005 s",
        "! model request timeout (attempt 2): HTTP 503: busy; retrying in 0.01 s",
        "! model request timeout (attempt 3): HTTP 503: busy",
        "✗ aborted: reconnect failed after 2 retries",
    ]


def test_bad_approval_mode_exits_1_before_anything_starts(cli: Cli, server: ScriptedServer) -> None:
    configured(cli, server)
    out = cli.run("run", "-m", "hi", "--approve", "sometimes")
    assert (out.returncode, out.stdout, out.stderr) == (
        1,
        "",
        'penguin: error: unknown approval mode "sometimes" '
        "(expected allow-all, deny-all, read-only or always-ask)\n",
    )
    assert cli.trace_files() == [] and server.requests == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["run", "-m", "hi"],
            "no model is configured: add one with `penguin config model add`, pass Model(...), "
            "or set PENGUIN_MODEL_ID",
        ),
        (
            ["run", "-m", "hi", "--provider", "x", "--model-id", "y"],
            "model x/y is not configured in this project",
        ),
        (
            ["run", "-m", "hi", "--provider", "x"],
            "a model reference needs both provider and model_id (or neither, for the default "
            "model)",
        ),
        (
            ["run", "-m", "hi", "--project-id", "../up"],
            "invalid project id \"../up\": use letters, digits, '_' and '-' only",
        ),
    ],
)
def test_setup_errors_are_one_line_and_exit_2(cli: Cli, args: list[str], message: str) -> None:
    out = cli.run(*args)
    assert (out.returncode, out.stdout, out.stderr) == (2, "", f"penguin: error: {message}\n")


def test_a_model_named_by_the_environment_needs_no_config(cli: Cli, server: ScriptedServer) -> None:
    server.push(text("Hello from the environment."))
    env = {
        **cli.env,
        "PENGUIN_MODEL_ID": "env-model",
        "PENGUIN_PROVIDER": "local-lab",
        "LOCAL_LAB_BASE_URL": server.openai_base_url,
    }
    out = cli.run("run", "-m", "hi", env=env)
    assert (out.returncode, out.stdout) == (0, "Hello from the environment.\n"), out.stderr
    _, _, model, _ = session_line(out.stderr)
    assert model == "local-lab/env-model"
    assert server.requests[0].body["model"] == "env-model"
    # No config file was needed or written with a model in it.
    project = cli.home / "default_project" / ".project_config.toml"
    assert "env-model" not in project.read_text()


def test_a_missing_workspace_exits_2(cli: Cli, server: ScriptedServer, tmp_path: Path) -> None:
    configured(cli, server)
    missing = tmp_path / "nowhere"
    out = cli.run("run", "-m", "hi", "--workspace", str(missing))
    assert (out.returncode, out.stderr) == (
        2,
        f"penguin: error: workspace {missing} does not exist or is not a directory\n",
    )


@pytest.mark.parametrize(
    "args",
    [[], ["run"], ["run", "-m", "x", "--thinking", "lots"], ["config", "model"], ["fly"]],
)
def test_usage_errors_exit_2(cli: Cli, args: list[str]) -> None:
    out = cli.run(*args)
    assert out.returncode == 2
    assert out.stderr.startswith("usage: penguin"), out.stderr


def test_thinking_and_an_explicit_workspace_reach_the_session(
    cli: Cli, server: ScriptedServer, tmp_path: Path
) -> None:
    configured(cli, server)
    other = tmp_path / "other"
    other.mkdir()
    server.push(text("ok"))
    out = cli.run("run", "-m", "hi", "--thinking", "high", "--workspace", str(other))
    assert out.returncode == 0
    assert Path(session_line(out.stderr)[3]) == other
    body = server.requests[0].body
    assert isinstance(body, dict) and body["reasoning_effort"] == "high"
    # `none` sends no reasoning level at all (for models that reject the field).
    server.push(text("ok"))
    assert cli.run("run", "-m", "hi", "--thinking", "none").returncode == 0
    body = server.requests[1].body
    assert isinstance(body, dict) and "reasoning_effort" not in body


def test_ctrl_c_aborts_the_run_and_kills_the_command(cli: Cli, server: ScriptedServer) -> None:
    configured(cli, server)
    pid_file = cli.workspace / "pid"
    server.push(tool_calls(exec_call("c1", "echo $$ > pid; exec sleep 30")))
    with reaped(pid_file):
        proc = cli.start("run", "-m", "sleep")
        wait_for("the command to start", lambda: pid_file.exists() and pid_file.read_text() != "")
        pid = int(pid_file.read_text())
        proc.signal(signal.SIGINT)
        code, stdout, stderr = proc.finish()
        assert (code, stdout) == (1, "")
        assert stderr.splitlines()[1:] == [
            '» exec_command(cmd="echo $$ > pid; exec sleep 30")',
            "Ctrl-C: aborting the task…",
            "  ⎿ [interrupted: tool aborted by user]",
            "    [aborted]",
            "✗ aborted: aborted by user",
        ]
        wait_for("the command's process group to be gone", lambda: process_gone(pid))


@pytest.mark.parametrize("command", ["run", "chat"])
def test_sigterm_aborts_the_task_kills_the_command_and_exits_143(
    cli: Cli, server: ScriptedServer, command: str
) -> None:
    configured(cli, server)
    pid_file = cli.workspace / "pid"
    server.push(tool_calls(exec_call("c1", "echo $$ > pid; exec sleep 30")))
    with reaped(pid_file):
        if command == "run":
            proc = cli.start("run", "-m", "sleep")
        else:
            proc = cli.start("chat", stdin_pipe=True)
            proc.write("sleep\n")
        wait_for("the command to start", lambda: pid_file.exists() and pid_file.read_text() != "")
        pid = int(pid_file.read_text())
        proc.signal(signal.SIGTERM)
        code, _, stderr = proc.finish()
        assert code == 143
        assert stderr.splitlines()[-3:] == [
            "  ⎿ [interrupted: tool aborted by user]",
            "    [aborted]",
            "✗ aborted: aborted by user",
        ]
        wait_for("the command's process group to be gone", lambda: process_gone(pid))


def test_ctrl_c_at_a_prompt_denies_the_call_and_the_task_goes_on(
    cli: Cli, server: ScriptedServer
) -> None:
    configured(cli, server)
    server.push(tool_calls(exec_call("c1", "touch made")), text("Fine."))
    proc = cli.start("run", "-m", "make it", "--approve", "always-ask", stdin_pipe=True)
    proc.wait_stderr("the prompt", lambda err: err.endswith("[Y/n] "))
    proc.signal(signal.SIGINT)
    code, stdout, stderr = proc.finish()
    assert (code, stdout) == (0, "Fine.\n")
    assert stderr.splitlines()[1:4] == [
        '? allow exec_command(cmd="touch made")? [Y/n]  denied (Ctrl-C)',
        "  ⎿ Tool call denied by user.",
        "    [aborted]",
    ]
    assert not (cli.workspace / "made").exists()


def test_chat_runs_one_task_per_line_until_exit(cli: Cli, server: ScriptedServer) -> None:
    configured(cli, server)
    server.push(text("one"), text("two"))
    out = cli.run("chat", stdin="first\n\n   \nsecond\n/exit\nnever sent\n")
    assert (out.returncode, out.stdout) == (0, "one\ntwo\n")
    prompts = [line for line in out.stderr.splitlines() if line.startswith("> ")]
    assert prompts == ["> first", "> ", ">    ", "> second", "> /exit"]
    assert len(server.requests) == 2
    assert [(m["role"], m["content"]) for m in messages_sent(server.requests[1])] == [
        ("user", "first"),
        ("assistant", "one"),
        ("user", "second"),
    ]


def test_chat_ends_at_end_of_input(cli: Cli, server: ScriptedServer) -> None:
    configured(cli, server)
    server.push(text("one"))
    out = cli.run("chat", stdin="only")  # no newline before the end
    assert (out.returncode, out.stdout) == (0, "one\n")


def test_ctrl_c_in_chat_aborts_the_task_and_returns_to_the_prompt(
    cli: Cli, server: ScriptedServer
) -> None:
    configured(cli, server)
    pid_file = cli.workspace / "pid"
    server.push(tool_calls(exec_call("c1", "echo $$ > pid; exec sleep 30")), text("back"))
    with reaped(pid_file):
        proc = cli.start("chat", stdin_pipe=True)
        proc.write("sleep\n")
        wait_for("the command to start", lambda: pid_file.exists() and pid_file.read_text() != "")
        pid = int(pid_file.read_text())
        proc.signal(signal.SIGINT)
        proc.wait_stderr("the abort", lambda err: "✗ aborted: aborted by user\n> " in err)
        wait_for("the command's process group to be gone", lambda: process_gone(pid))
        # Ctrl-C at the idle prompt starts the line over.
        proc.signal(signal.SIGINT)
        proc.wait_stderr("a new prompt", lambda err: err.endswith("(Ctrl-D or /exit quits)\n> "))
        proc.write("again\n")
        proc.close_stdin()
        code, stdout, _ = proc.finish()
    assert (code, stdout) == (0, "back\n")
    # The interrupted call reached the model paired with its output.
    assert [(m["role"], m.get("content")) for m in messages_sent(server.requests[1])] == [
        ("user", "sleep"),
        ("assistant", None),
        ("tool", "[interrupted: tool aborted by user]"),
        ("user", "again"),
    ]

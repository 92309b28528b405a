"""Running the installed ``penguin`` command in tests: a private data root, a configured model
pointing at a scripted server, and processes whose stderr can be watched while they run.

Waits poll with a generous deadline; the deadline only turns a hang into a failure with a
message, it never asserts on speed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripted_server import RecordedRequest, ScriptedServer

#: The console script installed with the package (``[project.scripts]``).
PENGUIN = str(Path(sys.executable).parent / "penguin")
#: Upper bound of any wait in these tests, in seconds (a hang guard, not a speed check).
DEADLINE_SECONDS = 60.0
#: Poll interval of the waits, in seconds.
POLL_SECONDS = 0.02

PROVIDER = "scripted"
MODEL_ID = "scripted-model"

#: Agent configuration for the tests: the default prompt, fast reconnects.
SYSTEM_YAML = """\
system_prompt: |
  You are a test agent in {{CWD}}.
max_turns: -1
model:
  max_tokens: 1000
  timeoutMs: 20000
reconnect:
  max_retries: 2
  base_delay_ms: 5
"""

SESSION_LINE = re.compile(
    r"^(resumed session|session) (session-[0-9-]+-[0-9a-f]{8}) · (\S+) · (.+)$"
)


@dataclass
class Cli:
    """A data root (``PENGUIN_HOME``), a workspace and the environment the command runs in."""

    home: Path
    workspace: Path
    env: dict[str, str]

    @classmethod
    def create(cls, tmp: Path) -> Cli:
        home = tmp / "home"
        workspace = tmp / "ws"
        workspace.mkdir(parents=True)
        state = home / "default_project" / "agents" / "default_agent" / "agent_state"
        state.mkdir(parents=True)
        (state / "system_config.yaml").write_text(SYSTEM_YAML)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.endswith(("_API_KEY", "_BASE_URL")) and k != "VIRTUAL_ENV"
        }
        env["PENGUIN_HOME"] = str(home)
        env["NO_COLOR"] = "1"
        return cls(home, workspace, env)

    def run(
        self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PENGUIN, *args],
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            cwd=self.workspace,
            env=env or self.env,
            timeout=DEADLINE_SECONDS,
        )

    def start(self, *args: str, stdin_pipe: bool = False) -> Proc:
        p = subprocess.Popen(
            [PENGUIN, *args],
            stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.workspace,
            env=self.env,
        )
        return Proc(p)

    def add_model(self, server: ScriptedServer) -> None:
        out = self.run(
            "config", "model", "add",
            "--provider", PROVIDER,
            "--model-id", MODEL_ID,
            "--base-url", server.openai_base_url,
            "--api-key", "test-key",
            "--set-default",
        )  # fmt: skip
        assert (out.returncode, out.stderr) == (0, ""), out

    @property
    def traces(self) -> Path:
        return self.home / "default_project" / "agents" / "default_agent" / "traces"

    def trace_files(self) -> list[Path]:
        return sorted(self.traces.glob("*/*.jsonl"))

    def trace_of(self, session_id: str) -> Path:
        files = [f for f in self.trace_files() if f.name.startswith(f"{session_id}_")]
        assert len(files) == 1, files
        return files[0]


def session_line(stderr: str) -> tuple[str, str, str, str]:
    """``(how, session id, model, workspace)`` of the session line (the first of stderr)."""
    first = stderr.splitlines()[0]
    m = SESSION_LINE.match(first)
    assert m is not None, first
    how, sid, model, ws = m.groups()
    return how, sid, model, ws


def trace_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def kinds(records: list[dict[str, Any]]) -> list[str]:
    return [r["type"] if r["type"] == "session_meta" else r["payload"]["type"] for r in records]


def messages_sent(request: RecordedRequest) -> list[dict[str, Any]]:
    """The chat messages of a Chat Completions request, without the system prompt."""
    body = request.body if isinstance(request.body, dict) else {}
    return [m for m in body.get("messages", []) if m.get("role") != "system"]


def wait_for(what: str, check: Callable[[], bool]) -> None:
    end = time.monotonic() + DEADLINE_SECONDS
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(POLL_SECONDS)


def process_gone(pid: int) -> bool:
    """Whether neither the process nor any member of the group it leads is left."""
    for probe in (os.kill, os.killpg):
        try:
            probe(pid, 0)
        except ProcessLookupError:
            continue
        return False
    return True


@contextmanager
def reaped(pid_file: Path) -> Iterator[None]:
    """Kills the process group named in ``pid_file`` on the way out (commands orphaned by a
    test that SIGKILLs the command line)."""
    try:
        yield
    finally:
        if pid_file.exists():
            try:
                os.killpg(int(pid_file.read_text().strip()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass


class Proc:
    """A running command line whose stdout and stderr are collected as they come (raw reads,
    so an open prompt without a newline is visible too)."""

    def __init__(self, p: subprocess.Popen[bytes]) -> None:
        self.p = p
        self._lock = threading.Lock()
        self._err = bytearray()
        self._out = bytearray()
        assert p.stderr is not None and p.stdout is not None
        self._threads = [
            threading.Thread(target=self._pump, args=(p.stderr.fileno(), self._err), daemon=True),
            threading.Thread(target=self._pump, args=(p.stdout.fileno(), self._out), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _pump(self, fd: int, into: bytearray) -> None:
        while data := os.read(fd, 65536):
            with self._lock:
                into += data

    @property
    def stderr(self) -> str:
        with self._lock:
            return self._err.decode()

    def wait_stderr(self, what: str, check: Callable[[str], bool]) -> None:
        wait_for(what, lambda: check(self.stderr))

    def write(self, text: str) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(text.encode())
        self.p.stdin.flush()

    def close_stdin(self) -> None:
        assert self.p.stdin is not None
        self.p.stdin.close()

    def signal(self, sig: int) -> None:
        self.p.send_signal(sig)

    def finish(self) -> tuple[int, str, str]:
        """Waits for the exit: ``(status, stdout, stderr)``."""
        code = self.p.wait(timeout=DEADLINE_SECONDS)
        for t in self._threads:
            t.join(DEADLINE_SECONDS)
        with self._lock:
            return code, self._out.decode(), self._err.decode()

"""``pip install .`` into a fresh virtual environment builds a release wheel that imports and
runs. Slow on a cold cache (a release build of the extension takes minutes); incremental with a
warm ``CARGO_TARGET_DIR``. Marked ``slow``; it still runs in ``make test``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scripted_server import ScriptedServer, text

REPO = Path(__file__).resolve().parent.parent

CHECK = textwrap.dedent(
    """
    import asyncio, sys
    import penguin_harness as ph

    async def main():
        agent = ph.create_agent(root=sys.argv[2])
        session = agent.create_session(model=ph.Model("scripted", "m", sys.argv[1], api_key="k"))
        async for msg in session.run("hi"):
            if msg["payload"].get("type") == "text":
                print(msg["payload"]["text"])
        print(ph.__file__)

    asyncio.run(main())
    """
)


@pytest.mark.slow
def test_pip_install_into_a_fresh_venv(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(REPO)],
        check=True,
        env=env,
        cwd=tmp_path,
        timeout=1800,
    )
    script = tmp_path / "check.py"
    script.write_text(CHECK)
    with ScriptedServer(
        [text("installed and running"), text("from the command line"), text("from the environment")]
    ) as server:
        out = subprocess.run(
            [str(python), str(script), server.openai_base_url, str(tmp_path / "data")],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
        assert (out.returncode, out.stderr) == (0, "")
        answer, location = out.stdout.splitlines()
        assert answer == "installed and running"
        assert Path(location).is_relative_to(venv)

        # The README's quick start with the installed `penguin` script.
        penguin = str(venv / "bin" / "penguin")
        cli_env = {**env, "PENGUIN_HOME": str(tmp_path / "cli-data")}
        for args in (
            ["config", "model", "add", "--provider", "local", "--model-id", "m",
             "--base-url", server.openai_base_url, "--set-default"],
            ["run", "-m", "hi"],
        ):  # fmt: skip
            out = subprocess.run(
                [penguin, *args],
                capture_output=True,
                text=True,
                env=cli_env,
                cwd=tmp_path,
                stdin=subprocess.DEVNULL,
                timeout=120,
            )
            assert out.returncode == 0, out
        assert out.stdout == "from the command line\n"

        # The README's one-line form: no config at all, the model named by the environment.
        bare_env = {
            **env,
            "PENGUIN_HOME": str(tmp_path / "bare-data"),
            "PENGUIN_MODEL_ID": "m",
            "OPENAI_BASE_URL": server.openai_base_url,
        }
        out = subprocess.run(
            [penguin, "run", "-m", "hi"],
            capture_output=True,
            text=True,
            env=bare_env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
        assert (out.returncode, out.stdout) == (0, "from the environment\n"), out

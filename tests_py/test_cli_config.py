"""``penguin config model add|list|remove|vision``: the project file under ``PENGUIN_HOME``,
its 0600 mode, keys never shown, keys from the environment."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

import penguin_harness as ph
from cli_support import Cli
from scripted_server import ScriptedServer, text


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli.create(tmp_path)


def config_file(cli: Cli, project: str = "default_project") -> Path:
    return cli.home / project / ".project_config.toml"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def ok(cli: Cli, *args: str, env: dict[str, str] | None = None) -> list[str]:
    out = cli.run("config", "model", *args, env=env)
    assert (out.returncode, out.stderr) == (0, ""), out
    return out.stdout.splitlines()


def test_add_list_vision_remove(cli: Cli) -> None:
    path = config_file(cli)
    env = {**cli.env, "OPENAI_API_KEY": "sk-from-env", "MYLAB_BASE_URL": "http://10.1.2.3:9/v1"}
    assert ok(cli, "list") == [
        f"no models configured in {path}; add one with "
        "`penguin config model add --provider P --model-id M [--base-url URL]`"
    ]
    assert not path.exists()  # listing writes nothing

    added = ok(
        cli, "add", "--provider", "openai", "--model-id", "gpt-x",
        "--context-window", "128000", "--max-tokens", "4000", env=env,
    )  # fmt: skip
    assert added == [
        f"added openai/gpt-x in {path}",
        "openai/gpt-x  (default)",
        "  openai-chat · https://api.openai.com/v1 · key from $OPENAI_API_KEY · context 128000 "
        "· max tokens 4000 · vision",
    ]
    assert mode(path) == 0o600
    ok(
        cli, "add", "--provider", "local", "--model-id", "qwen3",
        "--base-url", "http://127.0.0.1:8000/v1", "--no-vision", "--set-default",
    )  # fmt: skip
    ok(
        cli, "add", "--provider", "anthropic", "--model-id", "claude",
        "--client-type", "anthropic-messages", "--api-key", "sk-ant-secret",
    )  # fmt: skip
    ok(cli, "add", "--provider", "mylab", "--model-id", "m")
    assert ok(cli, "vision", "--provider", "anthropic", "--model-id", "claude") == [
        "vision model of project default_project: anthropic/claude"
    ]
    listing = ok(cli, "list", env=env)
    assert listing == [
        f"models of project default_project ({path}):",
        "openai/gpt-x",
        "  openai-chat · https://api.openai.com/v1 · key from $OPENAI_API_KEY · context 128000 "
        "· max tokens 4000 · vision",
        "local/qwen3  (default)",
        "  openai-chat · http://127.0.0.1:8000/v1 · key from $OPENAI_API_KEY · text only",
        "anthropic/claude  (vision model)",
        "  anthropic-messages · https://api.anthropic.com · key in config · vision",
        "mylab/m",
        "  openai-chat · http://10.1.2.3:9/v1 (from $MYLAB_BASE_URL) · key from $OPENAI_API_KEY "
        "· vision",
    ]
    # Without the variables: where a key would come from.
    assert ok(cli, "list")[4] == (
        "  openai-chat · http://127.0.0.1:8000/v1 · no key (set $LOCAL_API_KEY or "
        "$OPENAI_API_KEY or use --api-key) · text only"
    )
    assert "sk-ant-secret" not in "\n".join(listing)
    assert 'api_key = "sk-ant-secret"' in path.read_text()  # stored, in a private file
    assert mode(path) == 0o600

    # Replacing keeps the position; removing the default falls back to the first model.
    assert ok(cli, "add", "--provider", "mylab", "--model-id", "m", "--no-vision")[0] == (
        f"replaced mylab/m in {path}"
    )
    assert ok(cli, "remove", "--provider", "local", "--model-id", "qwen3") == [
        f"removed local/qwen3 from {path}"
    ]
    assert ok(cli, "remove", "--provider", "anthropic", "--model-id", "claude")
    assert ok(cli, "list") == [
        f"models of project default_project ({path}):",
        "openai/gpt-x  (default)",
        "  openai-chat · https://api.openai.com/v1 · no key (set $OPENAI_API_KEY or use "
        "--api-key) · context 128000 · max tokens 4000 · vision",
        "mylab/m",
        "  openai-chat · https://api.openai.com/v1 · no key (set $MYLAB_API_KEY or "
        "$OPENAI_API_KEY or use --api-key) · text only",
    ]
    assert "vision_model" not in path.read_text() and mode(path) == 0o600


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["remove", "--provider", "nope", "--model-id", "x"],
            "model nope/x is not configured in this project",
        ),
        (
            ["vision", "--provider", "local", "--model-id", "text-only"],
            "invalid model entry: local/text-only is configured without vision; the vision "
            "model must accept images",
        ),
        (
            ["vision", "--provider", "nope", "--model-id", "x"],
            "model nope/x is not configured in this project",
        ),
        (
            ["add", "--provider", "local", "--model-id", "m", "--base-url", "127.0.0.1:8000"],
            'invalid model entry: base URL "127.0.0.1:8000" must start with http:// or https://',
        ),
        (
            ["add", "--provider", "my lab", "--model-id", "m"],
            "invalid model entry: provider \"my lab\" must be letters, digits, '-', '_' or '.'",
        ),
        (["list", "--project-id", "a/b"], "invalid project id \"a/b\": use letters, digits, "
         "'_' and '-' only"),
    ],
)  # fmt: skip
def test_config_errors_are_one_line_and_exit_2(cli: Cli, args: list[str], message: str) -> None:
    ok(cli, "add", "--provider", "local", "--model-id", "text-only", "--no-vision")
    before = config_file(cli).read_text()
    out = cli.run("config", "model", *args)
    assert (out.returncode, out.stdout, out.stderr) == (2, "", f"penguin: error: {message}\n")
    assert config_file(cli).read_text() == before


@pytest.mark.parametrize(
    "args",
    [
        ["add", "--provider", "p"],
        ["add", "--provider", "p", "--model-id", "m", "--context-window", "0"],
        ["add", "--provider", "p", "--model-id", "m", "--client-type", "gemini"],
        ["remove", "--model-id", "m"],
    ],
)
def test_config_usage_errors_exit_2(cli: Cli, args: list[str]) -> None:
    out = cli.run("config", "model", *args)
    assert out.returncode == 2 and out.stderr.startswith("usage: penguin config model")
    assert not config_file(cli).exists()


def test_projects_are_separate_and_a_loose_file_becomes_private(cli: Cli) -> None:
    other = config_file(cli, "other")
    other.parent.mkdir(parents=True)
    other.write_text('[[models]]\nprovider = "a"\nmodel_id = "1"\n')
    other.chmod(0o644)
    ok(cli, "add", "--provider", "b", "--model-id", "2", "--project-id", "other")
    assert mode(other) == 0o600
    assert [m["model_id"] for m in ph.open_project("other", root=cli.home).models()] == ["1", "2"]
    assert not config_file(cli).exists()


def test_a_run_takes_the_key_from_the_environment(cli: Cli) -> None:
    with ScriptedServer([text("ok")]) as server:
        ok(
            cli, "add", "--provider", "scripted", "--model-id", "m",
            "--base-url", server.openai_base_url,
        )  # fmt: skip
        out = cli.run("run", "-m", "hi", env={**cli.env, "SCRIPTED_API_KEY": "from-env"})
        assert (out.returncode, out.stdout) == (0, "ok\n")
        assert server.requests[0].headers["authorization"] == "Bearer from-env"


def test_project_api(tmp_path: Path) -> None:
    project = ph.open_project(root=tmp_path)
    assert project.config_path == tmp_path / "default_project" / ".project_config.toml"
    assert project.add_model(ph.Model("local", "m", api_key="secret")) is False
    assert project.add_model(ph.Model("local", "m", vision=False), set_default=True) is True
    (model,) = project.models()
    # The replacement has no key of its own: it comes from the environment or nowhere.
    assert model["api_key"]["kind"] in ("env", "missing")
    assert {k: v for k, v in model.items() if k != "api_key"} == {
        "provider": "local",
        "model_id": "m",
        "client_type": "openai-chat",
        "base_url": "https://api.openai.com/v1",
        "base_url_source": {"kind": "default"},
        "context_window": None,
        "max_tokens": None,
        "vision": False,
        "is_default": True,
        "is_vision_model": False,
    }
    with pytest.raises(ph.ConfigError, match="configured without vision"):
        project.set_vision_model("local", "m")
    project.remove_model("local", "m")
    with pytest.raises(ph.ConfigError, match="model local/m is not configured"):
        project.remove_model("local", "m")
    assert project.models() == []
    with pytest.raises(ph.ConfigError, match="invalid project id"):
        ph.open_project("../x", root=tmp_path)

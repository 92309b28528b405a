"""Shared fixtures: a scripted model server, a temporary data root and workspace, sessions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import penguin_harness as ph
from helpers import model_for
from scripted_server import ScriptedServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def session(server: ScriptedServer, root: Path, workspace: Path) -> Iterator[ph.Session]:
    agent = ph.create_agent(root=root)
    with agent.create_session(workspace_dir=workspace, model=model_for(server)) as s:
        yield s

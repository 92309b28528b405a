"""Helpers shared by the tests: collecting runs, naming messages, comparing with traces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import penguin_harness as ph
from penguin_harness.types import OmniMessage
from scripted_server import ScriptedServer

ClientType = Literal["openai-chat", "anthropic-messages"]


def model_for(server: ScriptedServer, client_type: ClientType = "openai-chat") -> ph.Model:
    """An inline model pointing at the scripted server."""
    base = server.openai_base_url if client_type == "openai-chat" else server.base_url
    return ph.Model(
        provider="scripted",
        model_id="scripted-model",
        base_url=base,
        api_key="test-key",
        client_type=client_type,
    )


async def collect(run: ph.Run) -> list[OmniMessage]:
    """Every message of a run."""
    return [m async for m in run]


def kind(msg: OmniMessage) -> str:
    """``payload.type`` (``session_meta`` for metadata), plus ``/event_type`` for partials."""
    if msg["type"] == "session_meta":
        return "session_meta"
    payload: dict[str, Any] = dict(msg["payload"])
    if "event_type" in payload:
        return f"{payload['type']}/{payload['event_type']}"
    return str(payload["type"])


def complete(msgs: list[OmniMessage]) -> list[OmniMessage]:
    """The messages a trace records: everything except partials and origin-tagged ones."""
    return [m for m in msgs if not ph.is_partial(m) and "origin" not in m]


def trace_line(msg: OmniMessage) -> str:
    """A message serialized the way the trace writes it."""
    return json.dumps(msg, separators=(",", ":"), ensure_ascii=False)


def trace_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def payload(msg: OmniMessage) -> dict[str, Any]:
    """The payload as a plain dict (for whole-value comparisons without type narrowing)."""
    return dict(msg["payload"])


def last_payloads(msgs: list[OmniMessage], kind_name: str) -> list[dict[str, Any]]:
    """Payloads of every message of one kind."""
    return [payload(m) for m in msgs if kind(m) == kind_name]

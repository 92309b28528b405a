"""Message builders and guards."""

from __future__ import annotations

import re

import penguin_harness as ph
from penguin_harness.types import OmniMessage

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def test_builders() -> None:
    msg = ph.user_text("hello")
    assert TIMESTAMP.fullmatch(msg["timestamp"])
    assert list(msg) == ["timestamp", "type", "payload"]
    assert {k: v for k, v in msg.items() if k != "timestamp"} == {
        "type": "model_msg",
        "payload": {"type": "text", "role": "user", "text": "hello", "stop_reason": "completed"},
    }
    img = ph.user_image("https://example.invalid/cat.png")
    assert img["payload"] == {
        "type": "image_url",
        "role": "user",
        "image_url": "https://example.invalid/cat.png",
        "stop_reason": "completed",
    }


def test_guards() -> None:
    partial: OmniMessage = {
        "timestamp": "2026-01-01T00:00:00.000Z",
        "type": "model_msg",
        "payload": {
            "type": "partial_text",
            "role": "assistant",
            "event_type": "delta",
            "text": "x",
            "stop_reason": "completed",
        },
    }
    event: OmniMessage = {
        "timestamp": "2026-01-01T00:00:00.000Z",
        "type": "event_msg",
        "payload": {"type": "request_begin"},
    }
    text = ph.user_text("x")
    table = [
        (partial, (True, False, False, False)),
        (event, (False, False, True, False)),
        (text, (False, True, False, False)),
    ]
    for msg, expected in table:
        got = (
            ph.is_partial(msg),
            ph.is_complete_model_message(msg),
            ph.is_event(msg),
            ph.is_session_meta(msg),
        )
        assert got == expected, msg

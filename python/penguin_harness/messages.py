"""Builders and guards for OmniMessage dicts.

The builders come from the Rust core (timestamps, field order and defaults exactly as the
trace writes them); the guards only read the ``type`` keys.
"""

from __future__ import annotations

from penguin_harness._core import user_image, user_text
from penguin_harness.types import OmniMessage

__all__ = [
    "is_complete_model_message",
    "is_event",
    "is_partial",
    "is_session_meta",
    "user_image",
    "user_text",
]


def is_partial(msg: OmniMessage) -> bool:
    """A streamed ``partial_*`` fragment (never in the trace)."""
    return msg["type"] == "model_msg" and msg["payload"]["type"].startswith("partial_")


def is_complete_model_message(msg: OmniMessage) -> bool:
    """A complete model message (text, thinking, tool call, tool output, image, data)."""
    return msg["type"] == "model_msg" and not msg["payload"]["type"].startswith("partial_")


def is_event(msg: OmniMessage) -> bool:
    """An ``event_msg`` (request bounds, approvals, usage, abort, ...)."""
    return msg["type"] == "event_msg"


def is_session_meta(msg: OmniMessage) -> bool:
    """A ``session_meta`` message."""
    return msg["type"] == "session_meta"

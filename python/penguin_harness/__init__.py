"""penguin_harness: an agent harness with a Rust core.

A language model works in a workspace through a tiny toolset; every tool call passes one
approval; everything lands in a JSONL trace::

    import penguin_harness as ph

    agent = ph.create_agent()
    session = agent.create_session(model=ph.Model("local", "qwen", "http://127.0.0.1:8000/v1"))
    async for msg in session.run("list the files", approve=ph.approval.read_only(ask)):
        ...
"""

from __future__ import annotations

from penguin_harness import approval
from penguin_harness._core import (
    Agent,
    ConfigError,
    HarnessError,
    InvalidArgumentError,
    MessageError,
    Model,
    ModelError,
    Policy,
    PolicyError,
    Project,
    ResumeError,
    Run,
    RuntimeClosedError,
    Session,
    SessionDisposedError,
    SessionNotFoundError,
    StorageError,
    TraceError,
    TraceReader,
    UsageError,
    WorkspaceError,
    __version__,
    create_agent,
    open_project,
    read_trace,
)
from penguin_harness.messages import (
    is_complete_model_message,
    is_event,
    is_partial,
    is_session_meta,
    user_image,
    user_text,
)
from penguin_harness.types import ApproveFn, ModelInfo, OmniMessage, ToolCallMessage

__all__ = [
    "Agent",
    "ApproveFn",
    "ConfigError",
    "HarnessError",
    "InvalidArgumentError",
    "MessageError",
    "Model",
    "ModelError",
    "ModelInfo",
    "OmniMessage",
    "Policy",
    "PolicyError",
    "Project",
    "ResumeError",
    "Run",
    "RuntimeClosedError",
    "Session",
    "SessionDisposedError",
    "SessionNotFoundError",
    "StorageError",
    "ToolCallMessage",
    "TraceError",
    "TraceReader",
    "UsageError",
    "WorkspaceError",
    "__version__",
    "approval",
    "create_agent",
    "is_complete_model_message",
    "is_event",
    "is_partial",
    "is_session_meta",
    "open_project",
    "read_trace",
    "user_image",
    "user_text",
]

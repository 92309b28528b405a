"""Typed shapes of the OmniMessage dicts a run yields and a trace holds.

Every message is ``{"timestamp", "type", "payload", "origin"?}``; ``payload["type"]`` tells
the payload kind. These are ``TypedDict`` declarations only: the dicts themselves are built
by the Rust core, with keys in trace-line order.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Callable, Literal, TypedDict, Union

StopReason = Literal["completed", "failed", "aborted", "timeout", "malformed", "auth"]
Role = Literal["user", "assistant"]
EventType = Literal["start", "delta", "stop"]
Decision = Literal["allow", "deny", "forbidden"]
Fidelity = dict[str, Any]

# ---- model payloads (complete) --------------------------------------------------------------


class _TextBase(TypedDict):
    type: Literal["text"]
    role: Role
    text: str
    stop_reason: StopReason


class TextPayload(_TextBase, total=False):
    fidelity: Fidelity


class _ThinkingBase(TypedDict):
    type: Literal["thinking"]
    role: Literal["assistant"]
    thinking: str
    stop_reason: StopReason


class ThinkingPayload(_ThinkingBase, total=False):
    fidelity: Fidelity


class _InlineThinkingBase(TypedDict):
    type: Literal["inline_thinking"]
    role: Literal["assistant"]
    data: str
    mime_type: str
    stop_reason: StopReason


class InlineThinkingPayload(_InlineThinkingBase, total=False):
    fidelity: Fidelity


class _ToolCallBase(TypedDict):
    type: Literal["tool_call"]
    role: Literal["assistant"]
    name: str
    arguments: str
    tool_call_id: str
    stop_reason: StopReason


class ToolCallPayload(_ToolCallBase, total=False):
    fidelity: Fidelity


class _ToolCallOutputBase(TypedDict):
    type: Literal["tool_call_output"]
    role: Literal["user"]
    output: str
    tool_call_id: str
    stop_reason: StopReason


class ToolCallOutputPayload(_ToolCallOutputBase, total=False):
    images: list[str]


class ImageUrlPayload(TypedDict):
    type: Literal["image_url"]
    role: Literal["user"]
    image_url: str
    stop_reason: StopReason


class _InlineDataBase(TypedDict):
    type: Literal["inline_data"]
    role: Role
    data: str
    mime_type: str
    stop_reason: StopReason


class InlineDataPayload(_InlineDataBase, total=False):
    fidelity: Fidelity


# ---- model payloads (partial; streamed, never traced) ---------------------------------------


class PartialTextPayload(TypedDict):
    type: Literal["partial_text"]
    role: Literal["assistant"]
    event_type: EventType
    text: str
    stop_reason: StopReason


class PartialThinkingPayload(TypedDict):
    type: Literal["partial_thinking"]
    role: Literal["assistant"]
    event_type: EventType
    thinking: str
    stop_reason: StopReason


class PartialToolCallPayload(TypedDict):
    type: Literal["partial_tool_call"]
    role: Literal["assistant"]
    event_type: EventType
    name: str
    arguments: str
    tool_call_id: str
    stop_reason: StopReason


class _PartialToolCallOutputBase(TypedDict):
    type: Literal["partial_tool_call_output"]
    role: Literal["user"]
    event_type: EventType
    output: str
    tool_call_id: str
    stop_reason: StopReason


class PartialToolCallOutputPayload(_PartialToolCallOutputBase, total=False):
    images: list[str]


ModelPayload = Union[
    TextPayload,
    ThinkingPayload,
    InlineThinkingPayload,
    ToolCallPayload,
    ToolCallOutputPayload,
    ImageUrlPayload,
    InlineDataPayload,
    PartialTextPayload,
    PartialThinkingPayload,
    PartialToolCallPayload,
    PartialToolCallOutputPayload,
]

# ---- events ---------------------------------------------------------------------------------


class TokenCounts(TypedDict):
    cache_read: int
    cache_write: int
    output: int
    total: int


class RequestBeginPayload(TypedDict):
    type: Literal["request_begin"]


class _RequestEndBase(TypedDict):
    type: Literal["request_end"]
    status: StopReason


class RequestEndPayload(_RequestEndBase, total=False):
    error_message: str
    attempt: int
    retry_in_ms: int


class _ApprovalDecisionBase(TypedDict):
    type: Literal["approval_decision"]
    decision: Decision
    tool_call_id: str


class ApprovalDecisionPayload(_ApprovalDecisionBase, total=False):
    error_message: str


class TokenUsagePayload(TypedDict):
    type: Literal["token_usage"]
    session: TokenCounts
    request: TokenCounts


CompactionReason = Literal["context", "turns", "manual"]
CompactionMode = Literal["summarize", "discard"]


class CompactionBeginPayload(TypedDict):
    type: Literal["compaction_begin"]
    reason: CompactionReason
    mode: CompactionMode
    context: int
    turns: int


class _CompactionEndBase(TypedDict):
    type: Literal["compaction_end"]
    reason: CompactionReason
    mode: CompactionMode
    status: StopReason


class CompactionEndPayload(_CompactionEndBase, total=False):
    attempt: int
    error_message: str


class AbortPayload(TypedDict):
    type: Literal["abort"]
    reason: str | None


class SubagentPayload(TypedDict):
    type: Literal["subagent"]
    session_id: str


class _ToolSpecBase(TypedDict):
    name: str
    description: str


class ToolSpec(_ToolSpecBase, total=False):
    """A tool as offered to the model (``Session.tools()``)."""

    parameters: dict[str, Any]


class ToolListReadyPayload(TypedDict):
    type: Literal["tool_list_ready"]
    tools: list[ToolSpec]


EventPayload = Union[
    RequestBeginPayload,
    RequestEndPayload,
    ApprovalDecisionPayload,
    TokenUsagePayload,
    CompactionBeginPayload,
    CompactionEndPayload,
    AbortPayload,
    SubagentPayload,
    ToolListReadyPayload,
]

# ---- session metadata -----------------------------------------------------------------------


class _SessionMetaBase(TypedDict):
    session_id: str
    provider: str
    model_id: str
    model_context_window: int | Literal["unknown"]
    system_prompt: str
    agent_state: str
    workspace: str


class SessionMetaPayload(_SessionMetaBase, total=False):
    source: Literal["subagent", "schedule"]


# ---- envelopes ------------------------------------------------------------------------------


class _SessionMetaMessageBase(TypedDict):
    timestamp: str
    type: Literal["session_meta"]
    payload: SessionMetaPayload


class SessionMetaMessage(_SessionMetaMessageBase, total=False):
    origin: list[str]


class _ModelMessageBase(TypedDict):
    timestamp: str
    type: Literal["model_msg"]
    payload: ModelPayload


class ModelMessage(_ModelMessageBase, total=False):
    origin: list[str]


class _EventMessageBase(TypedDict):
    timestamp: str
    type: Literal["event_msg"]
    payload: EventPayload


class EventMessage(_EventMessageBase, total=False):
    origin: list[str]


class _ToolCallMessageBase(TypedDict):
    timestamp: str
    type: Literal["model_msg"]
    payload: ToolCallPayload


class ToolCallMessage(_ToolCallMessageBase, total=False):
    """What an approval callback receives (``origin`` set for a subagent's call)."""

    origin: list[str]


OmniMessage = Union[SessionMetaMessage, ModelMessage, EventMessage]

# ---- approval -------------------------------------------------------------------------------

ApprovalResult = Union[str, bool]
"""What an approval callback returns: ``"allow"``, ``"deny"``, ``"forbidden"``, True or False.
Typed as ``str`` so plain ``-> str`` callables check; any other string denies at run time."""

ApproveFn = Callable[[ToolCallMessage], Union[ApprovalResult, Awaitable[ApprovalResult]]]
"""An approval callback, sync or ``async def``. It receives the ``tool_call`` message; annotate
its parameter as ``ToolCallMessage`` (or ``Mapping[str, Any]``)."""

# ---- model configuration --------------------------------------------------------------------


class _SourceBase(TypedDict):
    kind: Literal["config", "env", "missing", "default"]


class Source(_SourceBase, total=False):
    """Where a model's key or base URL comes from: ``{"kind": "config"}``, ``{"kind": "env",
    "var": "OPENAI_API_KEY"}``, ``{"kind": "missing", "looked_at": [...]}`` (keys) or
    ``{"kind": "default"}`` (base URLs)."""

    var: str
    looked_at: list[str]


class ModelInfo(TypedDict):
    """One configured model as ``Project.models()`` lists it; the key itself is never shown."""

    provider: str
    model_id: str
    client_type: Literal["openai-chat", "anthropic-messages"]
    base_url: str
    base_url_source: Source
    api_key: Source
    context_window: int | None
    max_tokens: int | None
    vision: bool
    is_default: bool
    is_vision_model: bool


__all__ = [
    "AbortPayload",
    "ApprovalDecisionPayload",
    "ApprovalResult",
    "ApproveFn",
    "CompactionBeginPayload",
    "CompactionEndPayload",
    "CompactionMode",
    "CompactionReason",
    "Decision",
    "EventMessage",
    "EventPayload",
    "EventType",
    "Fidelity",
    "ImageUrlPayload",
    "InlineDataPayload",
    "InlineThinkingPayload",
    "ModelInfo",
    "ModelMessage",
    "ModelPayload",
    "OmniMessage",
    "PartialTextPayload",
    "PartialThinkingPayload",
    "PartialToolCallOutputPayload",
    "PartialToolCallPayload",
    "RequestBeginPayload",
    "RequestEndPayload",
    "Role",
    "SessionMetaMessage",
    "SessionMetaPayload",
    "Source",
    "StopReason",
    "SubagentPayload",
    "TextPayload",
    "ThinkingPayload",
    "TokenCounts",
    "TokenUsagePayload",
    "ToolCallMessage",
    "ToolCallOutputPayload",
    "ToolCallPayload",
    "ToolListReadyPayload",
    "ToolSpec",
]

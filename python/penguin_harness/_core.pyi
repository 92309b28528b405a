"""The native extension. Import from ``penguin_harness``, not from here."""

import os
from collections.abc import Awaitable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Literal, Self, final

from penguin_harness.types import (
    ApproveFn,
    ModelInfo,
    ModelMessage,
    OmniMessage,
    SessionMetaPayload,
    ToolSpec,
)

__all__ = [
    "Agent",
    "ConfigError",
    "HarnessError",
    "InvalidArgumentError",
    "MessageError",
    "Model",
    "ModelError",
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
    "TraceError",
    "TraceReader",
    "UsageError",
    "WorkspaceError",
    "__version__",
    "_shutdown_runtime",
    "create_agent",
    "open_project",
    "read_trace",
    "user_image",
    "user_text",
]

__version__: str

class HarnessError(Exception):
    """Root of every exception penguin_harness raises."""

class ConfigError(HarnessError):
    """A configuration file or value is missing, unreadable or invalid."""

class StorageError(HarnessError):
    """A file-system operation on the data root failed."""

class WorkspaceError(HarnessError):
    """An explicit workspace does not exist or is not a directory."""

class ModelError(HarnessError):
    """The model client could not be built (bad base URL, bad key)."""

class TraceError(HarnessError):
    """A trace file could not be read."""

class SessionNotFoundError(HarnessError):
    """A session id that has no trace."""

class ResumeError(HarnessError):
    """A trace that cannot be resumed."""

class SessionDisposedError(HarnessError):
    """The session was disposed."""

class MessageError(HarnessError):
    """A message is not a valid OmniMessage, or not valid run input."""

class PolicyError(HarnessError):
    """An approval policy could not be built (bad pattern, unknown mode)."""

class InvalidArgumentError(HarnessError):
    """An argument has a value the harness does not accept."""

class UsageError(HarnessError):
    """An API used out of order or outside an event loop."""

class RuntimeClosedError(HarnessError):
    """The harness runtime has shut down (the interpreter is exiting)."""

_ClientType = Literal["openai-chat", "anthropic-messages", "ant-messages"]
_ThinkingLevel = Literal["none", "low", "medium", "high", "xhigh", "max"]
_StrPath = str | os.PathLike[str]

@final
class Model:
    """An inline model definition, so a script needs no config file.

    ``base_url`` is the endpoint (OpenAI style including ``/v1``; Anthropic style the host);
    ``None`` uses ``<PROVIDER>_BASE_URL`` or the public endpoint of ``client_type``.
    ``api_key=None`` uses ``<PROVIDER>_API_KEY``, then ``OPENAI_API_KEY`` /
    ``ANTHROPIC_API_KEY``. ``max_tokens <= 0`` sends no output cap.
    """

    def __new__(
        cls,
        provider: str,
        model_id: str,
        base_url: str | None = None,
        api_key: str | None = None,
        client_type: _ClientType = "openai-chat",
        vision: bool = True,
        context_window: int | None = None,
        max_tokens: int | None = None,
    ) -> Self: ...
    @property
    def provider(self) -> str: ...
    @property
    def model_id(self) -> str: ...
    @property
    def base_url(self) -> str | None: ...
    @property
    def api_key(self) -> str | None: ...
    @property
    def client_type(self) -> str: ...
    @property
    def vision(self) -> bool: ...
    @property
    def context_window(self) -> int | None: ...
    @property
    def max_tokens(self) -> int | None: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...

@final
class Agent:
    """One agent of one project: ``<root>/<project_id>/agents/<agent_id>``."""

    @property
    def agent_id(self) -> str: ...
    @property
    def project_id(self) -> str: ...
    @property
    def root(self) -> Path:
        """The data root."""
    @property
    def agent_dir(self) -> Path: ...
    @property
    def traces_dir(self) -> Path: ...
    def create_session(
        self,
        *,
        workspace_dir: _StrPath | None = None,
        model: Model | None = None,
        provider: str | None = None,
        model_id: str | None = None,
        thinking_level: _ThinkingLevel | None = None,
    ) -> Session:
        """Creates a session.

        The model is ``model`` if given, else the configured ``(provider, model_id)`` pair
        (both or neither), else the project's default model. ``workspace_dir`` must exist;
        ``None`` creates a temporary workspace under the agent. Nothing is traced before the
        first run.
        """

    def resume_session(
        self,
        session_id: str,
        *,
        model: Model | None = None,
        provider: str | None = None,
        model_id: str | None = None,
        thinking_level: _ThinkingLevel | None = None,
    ) -> Session:
        """Reopens a session from its latest trace file and keeps appending to it.

        The context, the carry-over and the token counters are rebuilt by replaying the trace;
        tool calls that never got an output (the process exited) are answered with
        ``[interrupted: process exited before the tool finished]``. The model is ``model``,
        else the configured ``(provider, model_id)`` pair, else the trace's own pair looked up
        in the project config; a session started with an inline ``Model`` needs ``model=``
        again. The workspace is the session's own. Raises ``SessionNotFoundError`` for an
        unknown id and ``ResumeError`` when the trace cannot be resumed.
        """
    def latest_session_id(self) -> str | None:
        """The most recently written session of this agent (subagent sessions skipped);
        ``None`` when there is none."""

@final
class Session:
    """A conversation with one model in one workspace.

    Runs of one session are serialized: a run started while another is still going waits
    for it. Use ``with session:`` (or call ``dispose()``) to kill its background commands
    when done; live sessions are disposed at interpreter exit.
    """

    @property
    def id(self) -> str: ...
    @property
    def trace_path(self) -> Path:
        """The JSONL trace of this session's current model context."""
    @property
    def workspace(self) -> Path: ...
    @property
    def meta(self) -> SessionMetaPayload:
        """The ``session_meta`` payload (the trace's first line)."""
    def tools(self) -> list[ToolSpec]:
        """The tools offered to the model: ``{name, description, parameters}``."""
    def tool_permission(self, name: str) -> Literal["r", "rw"] | None:
        """A tool's permission; ``None`` for tools this session does not have."""
    def skip_reconnect_wait(self) -> bool:
        """Ends the current reconnect backoff now; ``False`` when none is in progress."""
    def run(
        self,
        messages: str | OmniMessage | Iterable[OmniMessage],
        *,
        approve: Policy | ApproveFn | None = None,
        thinking_level: _ThinkingLevel | None = None,
    ) -> Run:
        """Starts one task; iterate the result with ``async for``.

        ``messages``: a string (one user text), a message dict or a list of them (see
        ``user_text``, ``user_image``). ``approve``: ``None`` denies every tool call; a
        ``Policy`` from ``penguin_harness.approval``; or a callable taking the ``tool_call``
        message and returning ``"allow"``/``"deny"`` (``True``/``False``, ``"forbidden"``
        accepted), sync or ``async def``. Callables run on the event loop that iterates the
        run, one call at a time: a sync callable blocks that loop while it runs, so make
        long-waiting ones ``async``. A callable that raises or returns anything else denies,
        and the ``approval_decision`` event's ``error_message`` says why.

        The run starts on the first ``__anext__``.
        """
    def dispose(self) -> None:
        """Kills background commands and flushes the trace (synchronous, brief). Later runs
        raise ``SessionDisposedError``. Idempotent."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

@final
class Run:
    """One task as an async iterator of OmniMessage dicts.

    ``json.dumps(msg, separators=(",", ":"), ensure_ascii=False)`` of a non-partial message
    equals its trace line. Leaving early aborts the task the way the engine aborts
    (foreground commands killed, an ``abort`` event traced, carry-over kept for the next
    run): ``break`` (the run is dropped), ``await run.aclose()`` (returns once the task has
    ended), ``async with session.run(...) as run:``, or cancelling the awaiting task.
    """

    def __aiter__(self) -> Self: ...
    def __anext__(self) -> Awaitable[OmniMessage]:
        """The next message; raises ``UsageError`` outside a running event loop."""
    def aclose(self) -> Awaitable[None]:
        """Aborts the task; the awaitable resolves once the task has ended."""
    def abort(self) -> None:
        """Aborts the task; keep iterating to read up to its ``abort`` event."""
    def __aenter__(self) -> Awaitable[Self]: ...
    def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Awaitable[None]: ...

@final
class Policy:
    """An approval policy evaluated by the core; see ``penguin_harness.approval``."""

    @staticmethod
    def decide(decision: Literal["allow", "deny", "forbidden"]) -> Policy: ...
    @staticmethod
    def ask(ask: ApproveFn) -> Policy: ...
    @staticmethod
    def mode(name: str, ask: ApproveFn | None = None) -> Policy: ...
    @staticmethod
    def when_tools(tools: list[str], then: Policy | ApproveFn) -> Policy: ...
    @staticmethod
    def when_permission(permission: str, then: Policy | ApproveFn) -> Policy: ...
    @staticmethod
    def when_argument(
        tool: str, field: str, pattern: str, then: Policy | ApproveFn, *, whole: bool = True
    ) -> Policy: ...
    @staticmethod
    def first_match(policies: list[Policy | ApproveFn]) -> Policy: ...

@final
class Project:
    """A project's model configuration, ``<root>/<project_id>/.project_config.toml``.

    Every change rewrites the file with mode 0600 (it may hold keys). Keys not stored in the
    file come from ``<PROVIDER>_API_KEY``, then ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``.
    """

    @property
    def project_id(self) -> str: ...
    @property
    def config_path(self) -> Path: ...
    def models(self) -> list[ModelInfo]:
        """The configured models, in file order, with where each key comes from (never the
        key)."""
    def add_model(self, model: Model, *, set_default: bool = False) -> bool:
        """Adds ``model``, replacing one with the same ``(provider, model_id)``; returns
        whether one was replaced. Raises ``ConfigError`` for an entry that cannot work."""
    def remove_model(self, provider: str, model_id: str) -> None:
        """Removes a model and any default/vision reference to it; ``ConfigError`` if it is
        not configured."""
    def set_vision_model(self, provider: str, model_id: str) -> None:
        """Makes a configured model that accepts images the describer of ``describe_image``."""

@final
class TraceReader:
    """Iterator over a trace file's messages."""

    def __iter__(self) -> Self: ...
    def __next__(self) -> OmniMessage: ...

def create_agent(
    agent_id: str = "default_agent",
    *,
    project_id: str = "default_project",
    root: _StrPath | None = None,
) -> Agent:
    """Opens ``<root>/<project_id>/agents/<agent_id>``, creating defaults when absent.

    ``root=None`` uses ``$PENGUIN_HOME`` or ``~/.penguin/data``.
    """

def open_project(project_id: str = "default_project", *, root: _StrPath | None = None) -> Project:
    """A project's model configuration; nothing is written until the first change.

    ``root=None`` uses ``$PENGUIN_HOME`` or ``~/.penguin/data``.
    """

def read_trace(path: _StrPath) -> TraceReader:
    """Yields a trace file's messages; a torn last line is ignored, malformed middle lines
    are skipped."""

def user_text(text: str) -> ModelMessage:
    """A user text message."""

def user_image(url: str) -> ModelMessage:
    """A user image by URL (``https://…`` or a ``data:`` URL)."""

def _shutdown_runtime() -> None: ...

"""The ``penguin`` command line: run a task, chat, configure models.

A thin layer over the package: it parses arguments, renders the message stream and asks a
person about tool calls. Resolving models, the approval modes, resuming sessions and editing
the project file are done by the Rust core.

Output: the model's answer text streams to stdout; everything else (the session line, each
tool call with a compact view of its output, approval prompts, errors) goes to stderr, so
``penguin run -m "..." > answer.txt`` keeps just the answer.

Exit codes: 0 the task completed; 1 the task ended in ``abort`` (Ctrl-C, an authentication
error, reconnects exhausted, ...) or the approval mode is unknown; 2 the command could not
start (bad arguments, no model configured, unknown model or session, bad workspace); 143
after SIGTERM (the running task is aborted first, so its commands are killed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable

import penguin_harness as ph
from penguin_harness import approval
from penguin_harness._terminal import INTERRUPTED, Console, LineReader
from penguin_harness.types import ModelInfo, OmniMessage, Source, ToolCallMessage

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
#: Conventional status of a process ended by Ctrl-C before it could clean up (128 + SIGINT).
EXIT_INTERRUPTED = 130
#: Status after SIGTERM, once the running task was aborted (128 + SIGTERM).
EXIT_TERMINATED = 143

#: Output lines shown per tool call; the rest is counted (``… N more lines``).
OUTPUT_PREVIEW_LINES = 4
#: Characters shown of one output line.
OUTPUT_LINE_CHARS = 160
#: Characters shown of one argument value in a call line.
ARGUMENT_VALUE_CHARS = 80
#: Characters shown of a whole call line.
CALL_LINE_CHARS = 200

APPROVAL_MODES = ("allow-all", "deny-all", "read-only", "always-ask")
THINKING_LEVELS = ("none", "low", "medium", "high", "xhigh", "max")
CLIENT_TYPES = ("openai-chat", "anthropic-messages")


class CliError(Exception):
    """A problem with what was asked; reported as one line, exit status 2."""


# ---- rendering ------------------------------------------------------------------------------


#: Control characters shown escaped in call lines and output previews (all C0 but tab, DEL,
#: C1): a tool's output must not move the cursor, recolor or retitle the person's terminal.
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)] if c != 0x09}


def printable(text: str) -> str:
    return text.translate(_CONTROL)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, marked with ``…`` when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def compact_arguments(arguments: str) -> str:
    """A call's JSON arguments on one line: ``key=value, ...`` with long values cut."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return clip(arguments.replace("\n", "\\n"), CALL_LINE_CHARS)
    if isinstance(value, dict):
        parts = [
            f"{k}={clip(json.dumps(v, ensure_ascii=False), ARGUMENT_VALUE_CHARS)}"
            for k, v in value.items()
        ]
        return clip(", ".join(parts), CALL_LINE_CHARS)
    return clip(json.dumps(value, ensure_ascii=False), CALL_LINE_CHARS)


def describe_call(name: str, arguments: str) -> str:
    return printable(f"{name}({compact_arguments(arguments)})")


def preview_output(output: str) -> list[str]:
    """The first lines of a tool's output, then ``… N more lines``."""
    lines = output.rstrip("\n").split("\n")
    shown = [
        clip(printable(line.removesuffix("\r")), OUTPUT_LINE_CHARS)
        for line in lines[:OUTPUT_PREVIEW_LINES]
    ]
    rest = len(lines) - OUTPUT_PREVIEW_LINES
    if rest > 0:
        shown.append(f"… {rest} more line{'s' if rest != 1 else ''}")
    return shown


def origin_tag(msg: Mapping[str, Any]) -> str:
    """``[subagent-xxxxxxxx] `` for a subagent's message (as ``input_subagent`` names it)."""
    origin = msg.get("origin")
    if not origin:
        return ""
    return f"[subagent-{origin[-1][-8:]}] "


CallKey = tuple[str, str]


def call_key(msg: Mapping[str, Any], tool_call_id: str) -> CallKey:
    return (origin_tag(msg), tool_call_id)


#: How long a prompt waits for the stream to show the call it asks about (the call reaches the
#: renderer and the approval request reach Python by different paths), in seconds. Only the
#: order on screen depends on it.
PROMPT_CATCH_UP_SECONDS = 1.0


class CallBoard:
    """What the person has seen of one task's tool calls; shared by the renderer and the
    asker so each call is shown once and every output can be told apart."""

    def __init__(self) -> None:
        self.described: dict[CallKey, str] = {}
        #: Calls shown by a prompt (the renderer does not repeat them).
        self.prompted: set[CallKey] = set()
        #: The call shown last; an output of another call gets a header.
        self.last_shown: CallKey | None = None
        self._arrived: dict[CallKey, asyncio.Event] = {}

    def _event(self, key: CallKey) -> asyncio.Event:
        return self._arrived.setdefault(key, asyncio.Event())

    def arrived(self, key: CallKey, description: str) -> None:
        self.described[key] = description
        self._event(key).set()

    async def wait_arrival(self, key: CallKey) -> None:
        try:
            await asyncio.wait_for(self._event(key).wait(), PROMPT_CATCH_UP_SECONDS)
        except asyncio.TimeoutError:
            pass

    def describe(self, key: CallKey) -> str:
        return self.described.get(key, key[1])


@dataclass
class Renderer:
    """Shows one task's messages: answer text as it streams, each tool call once approved,
    a compact view of each output, failed requests and the abort."""

    console: Console
    board: CallBoard
    aborted: bool = False
    session_tokens: int | None = None

    def show(self, msg: OmniMessage) -> None:
        c = self.console
        tag = origin_tag(msg)
        if msg["type"] == "session_meta":
            if tag:
                c.line(c.dim(f"{tag}subagent started"))
            return
        p: dict[str, Any] = dict(msg["payload"])
        kind = p["type"]
        if kind == "partial_text" and not tag:
            if p["event_type"] == "delta":
                c.text(p["text"])
            elif p["event_type"] == "stop":
                c.end_text()
        elif kind == "partial_thinking" and not tag and p["event_type"] == "start":
            c.line(c.dim("… thinking"))
        elif kind == "tool_call":
            key = call_key(msg, p["tool_call_id"])
            self.board.arrived(key, describe_call(p["name"], p["arguments"]))
        elif kind == "approval_decision":
            key = call_key(msg, p["tool_call_id"])
            if key in self.board.prompted:
                self.board.prompted.discard(key)
            else:
                c.line(f"{tag}» {c.bold(self.board.describe(key))}")
                self.board.last_shown = key
        elif kind == "tool_call_output":
            self._output(msg, p)
        elif kind == "request_end" and p["status"] != "completed":
            text = f"{tag}! model request {p['status']}"
            if p.get("attempt") is not None:
                text += f" (attempt {p['attempt']})"
            if p.get("error_message"):
                text += f": {p['error_message']}"
            if p.get("retry_in_ms") is not None:
                text += f"; retrying in {p['retry_in_ms'] / 1000:g} s"
            c.line(c.red(text))
        elif kind == "token_usage" and not tag:
            self.session_tokens = int(p["session"]["total"])
        elif kind == "abort":
            if not tag:
                self.aborted = True
            c.line(c.red(f"{tag}✗ aborted: {p.get('reason') or 'no reason given'}"))

    def _output(self, msg: OmniMessage, p: dict[str, Any]) -> None:
        c = self.console
        tag = origin_tag(msg)
        key = call_key(msg, p["tool_call_id"])
        if key != self.board.last_shown:
            # Outputs arrive in completion order: name the call when it is not the last shown.
            c.line(c.dim(f"{tag}  (output of {self.board.describe(key)})"))
        lines = preview_output(p["output"])
        if p.get("images"):
            n = len(p["images"])
            lines.append(f"[{n} image{'s' if n != 1 else ''}]")
        if p["stop_reason"] != "completed":
            lines.append(f"[{p['stop_reason']}]")
        for i, line in enumerate(lines):
            c.line(f"{tag}  {'⎿ ' if i == 0 else '  '}{c.dim(line)}")
        self.board.last_shown = key


# ---- asking a person ------------------------------------------------------------------------


class Asker:
    """The approval callback: asks on stderr, reads the answer from stdin. ``n``/``no`` denies;
    anything else, a bare Enter included, allows; end of input or Ctrl-C denies."""

    def __init__(self, console: Console, reader: LineReader, stdin_is_tty: bool) -> None:
        self.console = console
        self.reader = reader
        self.stdin_is_tty = stdin_is_tty
        #: The running task's board (each task starts a new one).
        self.board = CallBoard()

    async def __call__(self, call: ToolCallMessage) -> str:
        p = call["payload"]
        tag = origin_tag(call)
        key = call_key(call, p["tool_call_id"])
        board = self.board
        # Let the text before the call reach the screen first.
        await board.wait_arrival(key)
        board.prompted.add(key)
        board.last_shown = key
        c = self.console
        c.prompt(f"{tag}? allow {c.bold(describe_call(p['name'], p['arguments']))}? [Y/n] ")
        try:
            answer = await self.reader.readline()
        except asyncio.CancelledError:  # the task was aborted while asking
            c.answered("(task aborted)")
            raise
        if answer is INTERRUPTED:
            c.answered(" denied (Ctrl-C)")
            return "deny"
        if answer is None:
            c.answered("denied (end of input)")
            return "deny"
        assert isinstance(answer, str)
        decision = "deny" if answer.strip().lower() in ("n", "no") else "allow"
        c.answered(None if self.stdin_is_tty else f"{answer} → {decision}")
        return decision


# ---- running tasks --------------------------------------------------------------------------


class Controller:
    """Signals. Ctrl-C (SIGINT) ends a pending read (an approval prompt denies; the chat
    prompt starts over), else aborts the running task. SIGTERM aborts the running task and
    ends the command, so its commands are killed rather than orphaned."""

    def __init__(self, console: Console, reader: LineReader) -> None:
        self.console = console
        self.reader = reader
        self.run: ph.Run | None = None
        self.interrupted = False
        self.terminating = False

    def on_sigint(self) -> None:
        if self.reader.interrupt():
            return
        if self.run is not None:
            self.interrupted = True
            self.run.abort()
            self.console.line(self.console.dim("Ctrl-C: aborting the task…"))

    def on_sigterm(self) -> None:
        self.terminating = True
        if self.run is not None:
            self.interrupted = True
            self.run.abort()
        self.reader.interrupt()


@dataclass
class Context:
    console: Console
    reader: LineReader
    asker: Asker
    controller: Controller
    policy: ph.Policy
    stdin_is_tty: bool


async def run_task(ctx: Context, session: ph.Session, text: str) -> bool:
    """Runs one task, showing it; ``True`` when it completed (did not end in ``abort``)."""
    c = ctx.console
    board = CallBoard()
    ctx.asker.board = board
    renderer = Renderer(c, board)
    ctx.controller.interrupted = False
    run = session.run(text, approve=ctx.policy)
    ctx.controller.run = run
    try:
        async for msg in run:
            renderer.show(msg)
    except ph.HarnessError as e:
        c.line(c.red(f"✗ the task failed: {e}"))
        return False
    finally:
        ctx.controller.run = None
        c.end_text()
    if renderer.aborted:
        return False
    if ctx.controller.interrupted:  # aborted before it started: no abort event to show
        c.line(c.red("✗ aborted before the task started"))
        return False
    tokens = (
        "" if renderer.session_tokens is None else f" · {renderer.session_tokens} session tokens"
    )
    c.line(c.dim(f"✓ done{tokens}"))
    return True


def open_session(args: argparse.Namespace, console: Console) -> ph.Session:
    agent = ph.create_agent(args.agent_id, project_id=args.project_id)
    if args.resume is not None:
        if args.workspace is not None:
            raise CliError(
                "--workspace cannot be used with --resume: a session keeps its workspace"
            )
        session_id = args.resume or agent.latest_session_id()
        if session_id is None:
            raise CliError(
                f"no session to resume: agent {agent.agent_id} of project "
                f"{agent.project_id} has none yet"
            )
        session = agent.resume_session(
            session_id,
            provider=args.provider,
            model_id=args.model_id,
            thinking_level=args.thinking,
        )
        how = "resumed session"
    else:
        session = agent.create_session(
            workspace_dir=args.workspace or os.getcwd(),
            provider=args.provider,
            model_id=args.model_id,
            thinking_level=args.thinking,
        )
        how = "session"
    meta = session.meta
    # A resumed session keeps its first model in the metadata; name the one in use.
    provider = args.provider or meta["provider"]
    model_id = args.model_id or meta["model_id"]
    console.line(console.dim(f"{how} {session.id} · {provider}/{model_id} · {session.workspace}"))
    return session


async def chat_loop(ctx: Context, session: ph.Session) -> int:
    c = ctx.console
    c.line(c.dim("one task per line · /exit or Ctrl-D quits · Ctrl-C aborts a running task"))
    while True:
        c.prompt("> ")
        line = await ctx.reader.readline()
        if ctx.controller.terminating:
            c.answered("")
            return EXIT_TERMINATED
        if line is INTERRUPTED:
            c.answered(" (Ctrl-D or /exit quits)")
            continue
        if line is None:
            c.answered("")
            return EXIT_OK
        assert isinstance(line, str)
        c.answered(None if ctx.stdin_is_tty else line)
        task = line.strip()
        if task == "/exit":
            return EXIT_OK
        if task:
            await run_task(ctx, session, task)
            if ctx.controller.terminating:
                return EXIT_TERMINATED


async def interactive(args: argparse.Namespace, chat: bool) -> int:
    console = Console(sys.stdout, sys.stderr)
    stdin_is_tty = os.isatty(0)
    reader = LineReader(0)
    asker = Asker(console, reader, stdin_is_tty)
    try:
        policy = approval.mode(args.approve, asker)
    except ph.PolicyError as e:
        error(str(e))
        return EXIT_FAILED
    try:
        session = open_session(args, console)
    except (ph.HarnessError, CliError) as e:
        error(str(e))
        return EXIT_USAGE
    controller = Controller(console, reader)
    ctx = Context(console, reader, asker, controller, policy, stdin_is_tty)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, controller.on_sigint)
    loop.add_signal_handler(signal.SIGTERM, controller.on_sigterm)
    try:
        with session:
            if chat:
                return await chat_loop(ctx, session)
            completed = await run_task(ctx, session, args.message)
            if controller.terminating:
                return EXIT_TERMINATED
            return EXIT_OK if completed else EXIT_FAILED
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        loop.remove_signal_handler(signal.SIGTERM)


def error(message: str) -> None:
    print(f"penguin: error: {message}", file=sys.stderr)


# ---- configuration commands -----------------------------------------------------------------


def describe_source(source: Source, what: str) -> str:
    kind = source["kind"]
    if kind == "config":
        return f"{what} in config"
    if kind == "env":
        return f"{what} from ${source.get('var', '?')}"
    if kind == "missing":
        names = " or ".join(f"${v}" for v in source.get("looked_at", []))
        return f"no {what} (set {names} or use --api-key)"
    return f"default {what}"


def describe_model(m: ModelInfo) -> list[str]:
    flags = (("default", m["is_default"]), ("vision model", m["is_vision_model"]))
    marks = [name for name, on in flags if on]
    head = f"{m['provider']}/{m['model_id']}" + (f"  ({', '.join(marks)})" if marks else "")
    url = m["base_url"]
    if m["base_url_source"]["kind"] == "env":
        url += f" (from ${m['base_url_source'].get('var', '?')})"
    details = [m["client_type"], url, describe_source(m["api_key"], "key")]
    if m["context_window"] is not None:
        details.append(f"context {m['context_window']}")
    if m["max_tokens"] is not None:
        details.append(f"max tokens {m['max_tokens']}")
    details.append("vision" if m["vision"] else "text only")
    return [head, "  " + " · ".join(details)]


def find_model(project: ph.Project, provider: str, model_id: str) -> ModelInfo:
    for m in project.models():
        if m["provider"] == provider and m["model_id"] == model_id:
            return m
    raise CliError(f"model {provider}/{model_id} is not configured")


def cmd_model_add(args: argparse.Namespace) -> int:
    project = ph.open_project(args.project_id)
    model = ph.Model(
        args.provider,
        args.model_id,
        base_url=args.base_url,
        api_key=args.api_key,
        client_type=args.client_type,
        vision=not args.no_vision,
        context_window=args.context_window,
        max_tokens=args.max_tokens,
    )
    replaced = project.add_model(model, set_default=args.set_default)
    verb = "replaced" if replaced else "added"
    print(f"{verb} {args.provider}/{args.model_id} in {project.config_path}")
    for line in describe_model(find_model(project, args.provider, args.model_id)):
        print(line)
    return EXIT_OK


def cmd_model_list(args: argparse.Namespace) -> int:
    project = ph.open_project(args.project_id)
    models = project.models()
    if not models:
        print(
            f"no models configured in {project.config_path}; add one with "
            "`penguin config model add --provider P --model-id M [--base-url URL]`"
        )
        return EXIT_OK
    print(f"models of project {project.project_id} ({project.config_path}):")
    for m in models:
        for line in describe_model(m):
            print(line)
    return EXIT_OK


def cmd_model_remove(args: argparse.Namespace) -> int:
    project = ph.open_project(args.project_id)
    project.remove_model(args.provider, args.model_id)
    print(f"removed {args.provider}/{args.model_id} from {project.config_path}")
    return EXIT_OK


def cmd_model_vision(args: argparse.Namespace) -> int:
    project = ph.open_project(args.project_id)
    project.set_vision_model(args.provider, args.model_id)
    print(f"vision model of project {project.project_id}: {args.provider}/{args.model_id}")
    return EXIT_OK


def config_command(handler: Callable[[argparse.Namespace], int]) -> Callable[..., int]:
    """Runs a config command, reporting harness errors as one line with status 2."""

    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (ph.HarnessError, CliError) as e:
            error(str(e))
            return EXIT_USAGE

    return run


# ---- arguments ------------------------------------------------------------------------------


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="penguin",
        description="Run a language-model agent in a workspace.",
        epilog="Exit status: 0 completed, 1 the task was aborted (or unknown --approve mode), "
        "2 the command could not start.",
    )
    parser.add_argument("--version", action="version", version=f"penguin {ph.__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    project = argparse.ArgumentParser(add_help=False)
    project.add_argument(
        "--project-id", default="default_project", help="project (default: default_project)"
    )

    session = argparse.ArgumentParser(add_help=False, parents=[project])
    session.add_argument(
        "--agent-id", default="default_agent", help="agent (default: default_agent)"
    )
    session.add_argument(
        "--workspace", metavar="DIR", help="directory the agent works in (default: current)"
    )
    session.add_argument("--provider", help="provider of a configured model (with --model-id)")
    session.add_argument("--model-id", help="id of a configured model (with --provider)")
    session.add_argument(
        "--approve",
        default="allow-all",
        metavar="MODE",
        help=f"tool call approval: {', '.join(APPROVAL_MODES)} (default: allow-all)",
    )
    session.add_argument(
        "--thinking",
        choices=THINKING_LEVELS,
        help="reasoning level sent to the model (default: the agent's, medium); none sends none",
    )
    session.add_argument(
        "--resume",
        nargs="?",
        const="",
        metavar="SESSION_ID",
        help="continue a session (default: the agent's latest)",
    )

    run = commands.add_parser(
        "run", parents=[session], help="run one task", description="Run one task and exit."
    )
    run.add_argument("-m", "--message", required=True, help="the task")
    run.set_defaults(handler=lambda a: asyncio.run(interactive(a, chat=False)))

    chat = commands.add_parser(
        "chat",
        parents=[session],
        help="one task per line until /exit or end of input",
        description="Read tasks from stdin, one per line, until /exit or end of input.",
    )
    chat.set_defaults(handler=lambda a: asyncio.run(interactive(a, chat=True)))

    config = commands.add_parser("config", help="configure models")
    config_commands = config.add_subparsers(title="config", metavar="WHAT")
    model = config_commands.add_parser("model", help="the project's models")
    model_commands = model.add_subparsers(title="model", metavar="ACTION")
    pair = argparse.ArgumentParser(add_help=False, parents=[project])
    pair.add_argument("--provider", required=True, help="provider, e.g. openai, anthropic, local")
    pair.add_argument("--model-id", required=True, help="the model's id at the provider")

    add = model_commands.add_parser("add", parents=[pair], help="add or replace a model")
    add.add_argument(
        "--base-url",
        help="endpoint (OpenAI style with /v1; default: $<PROVIDER>_BASE_URL or the public one)",
    )
    add.add_argument(
        "--api-key",
        help="stored in the project file (mode 0600); default: $<PROVIDER>_API_KEY, "
        "then $OPENAI_API_KEY / $ANTHROPIC_API_KEY",
    )
    add.add_argument(
        "--client-type",
        choices=CLIENT_TYPES,
        default="openai-chat",
        help="wire protocol (default: openai-chat)",
    )
    add.add_argument(
        "--context-window", type=positive_int, metavar="N", help="context window in tokens"
    )
    add.add_argument("--max-tokens", type=int, metavar="N", help="output cap (<= 0: none sent)")
    add.add_argument("--no-vision", action="store_true", help="the model does not accept images")
    add.add_argument("--set-default", action="store_true", help="use it when no model is named")
    add.set_defaults(handler=config_command(cmd_model_add))

    listing = model_commands.add_parser("list", parents=[project], help="list models (no keys)")
    listing.set_defaults(handler=config_command(cmd_model_list))

    remove = model_commands.add_parser("remove", parents=[pair], help="remove a model")
    remove.set_defaults(handler=config_command(cmd_model_remove))

    vision = model_commands.add_parser(
        "vision", parents=[pair], help="the model that describes images for text-only models"
    )
    vision.set_defaults(handler=config_command(cmd_model_vision))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_usage(sys.stderr)
        error("name a command: run, chat or config model add|list|remove|vision")
        return EXIT_USAGE
    try:
        return int(handler(args))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())

"""A scripted model server for the Python tests: real HTTP on 127.0.0.1, asyncio.

It answers each request with the next scripted reply and records every request. A
``Turn`` (text, thinking, tool calls) is rendered in the wire protocol the request used:
OpenAI Chat Completions SSE on ``POST .../chat/completions``, Anthropic Messages SSE on
``POST .../v1/messages``. ``Status`` sends an HTTP error, ``Stall`` sends headers and then
nothing. Requests beyond the script get ``repeat`` if set, else HTTP 599 with an explaining
body, so a test that sends too many requests fails loudly instead of hanging.

The server runs its own event loop on a daemon thread, so synchronous tests, subprocesses and
notebook kernels can use it as well as async tests. Every reply closes its connection.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

#: Usage every scripted OpenAI reply reports (prompt, completion, cached prompt tokens).
OPENAI_USAGE = (20, 8, 4)
#: Usage every scripted Anthropic reply reports (input, cache-read, output tokens).
ANTHROPIC_USAGE = (10, 3, 5)
#: Largest request body the server reads, in bytes; requests are small JSON documents.
MAX_BODY_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Call:
    """A tool call in a scripted turn; ``arguments`` is the JSON text the model sends."""

    id: str
    name: str
    arguments: str


def exec_call(call_id: str, cmd: str, **extra: Any) -> Call:
    """An ``exec_command`` call."""
    return Call(call_id, "exec_command", json.dumps({"cmd": cmd, **extra}))


@dataclass(frozen=True)
class Turn:
    """One model response: optional thinking, optional text, then tool calls."""

    text: str | None = None
    thinking: str | None = None
    calls: tuple[Call, ...] = ()
    #: Seconds to wait before each SSE event (slow streams).
    event_delay: float = 0.0


def text(answer: str, *, thinking: str | None = None, event_delay: float = 0.0) -> Turn:
    """A text answer (streamed one word per delta)."""
    return Turn(text=answer, thinking=thinking, event_delay=event_delay)


def tool_calls(*calls: Call, text_before: str | None = None) -> Turn:
    """A response that calls tools."""
    return Turn(text=text_before, calls=tuple(calls))


@dataclass(frozen=True)
class Status:
    """An HTTP error response."""

    status: int
    body: str = ""
    content_type: str = "application/json"


@dataclass(frozen=True)
class Stall:
    """SSE headers, then silence for ``seconds`` (idle-timeout tests)."""

    seconds: float


Reply = Union[Turn, Status, Stall]


@dataclass
class RecordedRequest:
    """A request as received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any = field(default=None)


def _words(s: str) -> list[str]:
    out: list[str] = []
    cur = ""
    for ch in s:
        cur += ch
        if ch == " ":
            out.append(cur)
            cur = ""
    if cur:
        out.append(cur)
    return out


def _pieces(s: str, size: int = 7) -> list[str]:
    return [s[i : i + size] for i in range(0, len(s), size)] or [""]


def openai_events(turn: Turn) -> list[str]:
    """The Chat Completions SSE events of ``turn``."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        c = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "scripted",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(c)}\n\n"

    events = [chunk({"role": "assistant", "content": ""})]
    if turn.thinking:
        events += [chunk({"reasoning_content": w}) for w in _words(turn.thinking)]
    if turn.text:
        events += [chunk({"content": w}) for w in _words(turn.text)]
    for index, call in enumerate(turn.calls):
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]})
            for p in _pieces(call.arguments)
        ]
    events.append(chunk({}, "tool_calls" if turn.calls else "stop"))
    prompt, completion, cached = OPENAI_USAGE
    usage = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "scripted",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }
    events.append(f"data: {json.dumps(usage)}\n\n")
    events.append("data: [DONE]\n\n")
    return events


def anthropic_events(turn: Turn) -> list[str]:
    """The Messages SSE events of ``turn``."""

    def event(data: dict[str, Any]) -> str:
        return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"

    input_tokens, cache_read, output_tokens = ANTHROPIC_USAGE
    events = [
        event(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_scripted",
                    "type": "message",
                    "role": "assistant",
                    "model": "scripted",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": input_tokens,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": cache_read,
                        "output_tokens": 1,
                    },
                },
            }
        )
    ]
    index = 0

    def block(start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        events.append(
            event({"type": "content_block_start", "index": index, "content_block": start})
        )
        for d in deltas:
            events.append(event({"type": "content_block_delta", "index": index, "delta": d}))
        events.append(event({"type": "content_block_stop", "index": index}))
        index += 1

    if turn.thinking:
        block(
            {"type": "thinking", "thinking": "", "signature": ""},
            [{"type": "thinking_delta", "thinking": w} for w in _words(turn.thinking)]
            + [{"type": "signature_delta", "signature": "sig-scripted"}],
        )
    if turn.text:
        block(
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": w} for w in _words(turn.text)],
        )
    for call in turn.calls:
        block(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": {}},
            [{"type": "input_json_delta", "partial_json": p} for p in _pieces(call.arguments)],
        )
    stop = "tool_use" if turn.calls else "end_turn"
    events.append(
        event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            }
        )
    )
    events.append(event({"type": "message_stop"}))
    return events


_SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"connection: close\r\n\r\n"
)


class ScriptedServer:
    """See the module docs. Use as a context manager, or call ``start()``/``close()``."""

    def __init__(self, replies: Sequence[Reply] = (), *, repeat: Reply | None = None):
        self._lock = threading.Lock()
        self._replies: deque[Reply] = deque(replies)
        self._repeat = repeat
        self._requests: list[RecordedRequest] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.port = 0

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        self._thread = threading.Thread(
            target=self._serve, name="scripted-model-server", daemon=True
        )
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise RuntimeError("scripted server failed to start") from self._error
        return self

    def close(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(self._handle, "127.0.0.1", 0)
            )
            sockets = self._server.sockets
            self.port = sockets[0].getsockname()[1]
        except BaseException as e:  # reported to start()
            self._error = e
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()

    # -- script ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (Anthropic-style base URL)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` (OpenAI-style base URL)."""
        return f"{self.base_url}/v1"

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._replies)

    # -- HTTP -----------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._answer(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path = ([*lines[0].split(" "), "", ""])[:2]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        length = min(int(headers.get("content-length", "0") or 0), MAX_BODY_BYTES)
        raw = await reader.readexactly(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            self._requests.append(RecordedRequest(method, path, headers, body))
            reply = self._replies.popleft() if self._replies else self._repeat
        if reply is None:
            reply = Status(599, "scripted model server: no reply left in the script", "text/plain")
        if isinstance(reply, Status):
            data = reply.body.encode()
            writer.write(
                f"HTTP/1.1 {reply.status} Scripted\r\ncontent-type: {reply.content_type}\r\n"
                f"content-length: {len(data)}\r\nconnection: close\r\n\r\n".encode()
                + data
            )
            await writer.drain()
            return
        writer.write(_SSE_HEAD)
        await writer.drain()
        if isinstance(reply, Stall):
            await asyncio.sleep(reply.seconds)
            return
        if path.endswith("/chat/completions"):
            events = openai_events(reply)
        elif path.endswith("/v1/messages"):
            events = anthropic_events(reply)
        else:
            events = [f"event: error\ndata: unknown path {path}\n\n"]
        if not reply.event_delay:
            writer.write("".join(events).encode())
            await writer.drain()
            return
        for ev in events:
            await asyncio.sleep(reply.event_delay)
            writer.write(ev.encode())
            await writer.drain()


def texts_sent(request: RecordedRequest) -> Iterator[str]:
    """Every text the request carried to the model (both protocols), in order."""
    body = request.body if isinstance(request.body, dict) else {}
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            yield content
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict):
                    if isinstance(part.get("text"), str):
                        yield part["text"]
                    inner = part.get("content")
                    if isinstance(inner, str):
                        yield inner

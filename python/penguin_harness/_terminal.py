"""Terminal plumbing for the ``penguin`` command line: interruptible stdin lines and a console
that keeps the answer (stdout) apart from everything else (stderr).

Stdin is read on the event loop (``loop.add_reader``), not by a thread blocked in ``read()``:
a prompt interrupted by Ctrl-C then leaves nothing behind that would swallow the next line.
Descriptors the loop cannot watch (regular files, ``/dev/null``) never block, so they are read
directly.
"""

from __future__ import annotations

import asyncio
import os
from typing import TextIO, Union

#: Bytes asked for per ``read()`` on stdin.
READ_CHUNK_BYTES = 64 * 1024
#: Longest line kept, in bytes: a longer run without a newline is handed out as one line, so
#: piping a large file into a prompt cannot grow memory without bound.
MAX_LINE_BYTES = 1024 * 1024


class Interrupted:
    """What ``LineReader.readline`` returns when Ctrl-C ended the wait."""

    def __repr__(self) -> str:
        return "INTERRUPTED"


INTERRUPTED = Interrupted()

#: A line without its newline, ``None`` at end of input, or ``INTERRUPTED``.
ReadResult = Union[str, None, Interrupted]


class LineReader:
    """Lines from a file descriptor, awaited on the running event loop."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buf = bytearray()
        self._eof = False
        self._waiter: asyncio.Future[bool] | None = None

    def interrupt(self) -> bool:
        """Ends a pending ``readline`` with ``INTERRUPTED``; ``False`` when none is pending."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(False)
            return True
        return False

    async def readline(self) -> ReadResult:
        loop = asyncio.get_running_loop()
        while True:
            line = self._take_line()
            if line is not None:
                return line
            if self._eof:
                return None
            waiter: asyncio.Future[bool] = loop.create_future()
            self._waiter = waiter
            try:
                try:
                    loop.add_reader(self._fd, self._on_readable, waiter)
                except (OSError, ValueError):
                    self._read_once()  # not pollable: a read returns at once
                    continue
                try:
                    if not await waiter:
                        return INTERRUPTED
                finally:
                    loop.remove_reader(self._fd)
            finally:
                self._waiter = None

    def _on_readable(self, waiter: asyncio.Future[bool]) -> None:
        self._read_once()
        if not waiter.done():
            waiter.set_result(True)

    def _read_once(self) -> None:
        try:
            data = os.read(self._fd, READ_CHUNK_BYTES)
        except BlockingIOError:
            return
        except OSError:  # closed or unreadable stdin counts as end of input
            data = b""
        if data:
            self._buf += data
        else:
            self._eof = True

    def _take_line(self) -> str | None:
        end = self._buf.find(b"\n")
        if end < 0:
            if len(self._buf) >= MAX_LINE_BYTES or (self._eof and self._buf):
                end = len(self._buf)
            else:
                return None
        raw = bytes(self._buf[:end])
        del self._buf[: end + 1]
        return raw.decode("utf-8", errors="replace").removesuffix("\r")


#: Control characters dropped from answer text written to a terminal (all C0 but tab and
#: newline, DEL, C1): the model's text must not move the cursor or rewrite the screen. Text
#: written to a file or pipe is kept as is.
_TERMINAL_UNSAFE = dict.fromkeys([*range(0x20), *range(0x7F, 0xA0)])
del _TERMINAL_UNSAFE[0x09], _TERMINAL_UNSAFE[0x0A]

_DIM = "\x1b[2m"
_BOLD = "\x1b[1m"
_RED = "\x1b[31m"
_RESET = "\x1b[0m"


class Console:
    """Where the command line writes: the answer text to ``out``, the rest to ``err``.

    Colors only when ``err`` is a terminal and ``NO_COLOR`` is unset.
    """

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self._out_mid_line = False
        self._err_mid_line = False
        self._out_tty = out.isatty()
        self._color = err.isatty() and not os.environ.get("NO_COLOR")
        # While a prompt waits for its answer, output is held back so it cannot break the
        # prompt's line; ``answered`` releases it.
        self._held: list[tuple[bool, str]] | None = None

    def _style(self, text: str, style: str) -> str:
        return f"{style}{text}{_RESET}" if self._color and style else text

    def dim(self, text: str) -> str:
        return self._style(text, _DIM)

    def bold(self, text: str) -> str:
        return self._style(text, _BOLD)

    def red(self, text: str) -> str:
        return self._style(text, _RED)

    def text(self, chunk: str) -> None:
        """Streams answer text."""
        if not chunk:
            return
        if self._out_tty:
            chunk = chunk.translate(_TERMINAL_UNSAFE)
        if self._held is not None:
            self._held.append((True, chunk))
            return
        self._write_out(chunk)

    def end_text(self) -> None:
        """Ends the current answer segment on a line of its own."""
        if self._held is not None:
            self._held.append((True, ""))
        elif self._out_mid_line:
            self._write_out("\n")

    def line(self, text: str) -> None:
        """One status line on ``err``."""
        if self._held is not None:
            self._held.append((False, text))
            return
        self._line_break()
        self.err.write(text + "\n")
        self.err.flush()

    def prompt(self, text: str) -> None:
        """A prompt on ``err``, left open for the answer; other output waits until
        ``answered``."""
        self._line_break()
        self.err.write(text)
        self.err.flush()
        self._err_mid_line = True
        self._held = []

    def answered(self, echo: str | None) -> None:
        """Closes a prompt's line with ``echo`` (what the person's answer meant, when the
        terminal did not show it; ``None`` when the terminal's echo already ended the line),
        then writes what was held back."""
        if echo is not None:
            self.err.write(echo + "\n")
            self.err.flush()
        self._err_mid_line = False
        held, self._held = self._held or [], None
        for to_out, text in held:
            if to_out:
                if text:
                    self.text(text)
                else:
                    self.end_text()
            else:
                self.line(text)

    def _write_out(self, text: str) -> None:
        try:
            self.out.write(text)
            self.out.flush()
        except BrokenPipeError:
            # The reader of the answer went away (``| head``): drop the rest of the answer,
            # keep the task and its status lines going.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.out.fileno())
            os.close(devnull)
        self._out_mid_line = not text.endswith("\n")

    def _line_break(self) -> None:
        if self._out_mid_line and self._out_tty:
            self._write_out("\n")  # same terminal: do not continue the answer's line
        if self._err_mid_line:
            self.err.write("\n")
            self.err.flush()
            self._err_mid_line = False

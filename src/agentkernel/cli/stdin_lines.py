"""Lines of a pipe or file read so that Ctrl-C always ends the wait.

A SIGINT is delivered to whichever thread of the process the kernel picks.
When that is not the main thread, Python marks it pending, but a main thread
blocked in `read()` is not woken: `sys.stdin.readline()` would wait for the
next line, for ever when none comes (a chat on a pipe after its banner, while
a worker thread the start-up made is still alive). So the descriptor is
waited on with `select` for at most POLL_SECS at a time: each return to
Python raises the pending KeyboardInterrupt in the main thread. Lines are
cut from the bytes read here (the text stream's own buffer is not used):
`\\n`, `\\r\\n` and `\\r` end a line, as in the text stream's universal
newlines, and the text is decoded as the stream would decode it.
"""

from __future__ import annotations

import codecs
import io
import os
import re
import select
from typing import TextIO

POLL_SECS = 0.25
"""The longest a pending Ctrl-C that another thread took waits to be raised."""

_LINE_END = re.compile(r"\r\n|\r|\n")
_CHUNK = 65536


class StdinLines:
    """The next line of `stream`, read through its file descriptor (its text buffer never
    holds what this reads); a stream with no descriptor (a test's StringIO) or a system
    without `select` on pipes is read with `readline`."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._fd = _fd_of(stream)
        encoding = getattr(stream, "encoding", None) or "utf-8"
        self._decoder = codecs.getincrementaldecoder(encoding)(
            errors=getattr(stream, "errors", None) or "strict"
        )
        self._text = ""
        self._ended = False

    def line(self) -> str | None:
        """The next line without its line break; None once the input has ended."""
        if self._fd is None:
            read = self.stream.readline()
            return read.removesuffix("\n").removesuffix("\r") if read else None
        while True:
            found = self._cut()
            if found is not None:
                return found
            if self._ended:
                rest, self._text = self._text, ""
                return rest or None
            self._fill()

    def _cut(self) -> str | None:
        """The first whole line of what was read, taken off it; None when there is none yet (a
        `\\r` last may be the first half of a `\\r\\n` still to come)."""
        end = _LINE_END.search(self._text)
        if end is None or (end.group() == "\r" and end.end() == len(self._text) and not self._ended):
            return None
        found, self._text = self._text[: end.start()], self._text[end.end() :]
        return found

    def _fill(self) -> None:
        """Wait for bytes (POLL_SECS at a time: see the module's docstring) and decode them."""
        assert self._fd is not None
        while not select.select([self._fd], [], [], POLL_SECS)[0]:
            pass  # back in Python: a Ctrl-C another thread took is raised here
        data = os.read(self._fd, _CHUNK)
        self._text += self._decoder.decode(data, final=not data)
        self._ended = not data


def _fd_of(stream: TextIO) -> int | None:
    if os.name != "posix":
        return None
    try:
        return stream.fileno()
    except (io.UnsupportedOperation, AttributeError, ValueError):
        return None


__all__ = ["POLL_SECS", "StdinLines"]

"""A stdio MCP server's stderr: its last lines kept for error messages, every line logged, memory bounded.

A server writes to stderr for as long as it runs, and some log every
request: kept whole (in memory or a temporary file) that grows without end
for a long-lived server. So its stderr is a pipe drained by a daemon
thread: each line goes to the `agentkernel.mcp` log at INFO (`-v` shows
it), and only the last `keep` bytes are kept, to quote when the server
fails. Every read of the pipe happens under one lock, and `text()` first
takes whatever the pipe still holds, so a server that wrote its last words
and exited a moment ago is quoted in full, whatever the thread's progress.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from typing import TextIO

log = logging.getLogger("agentkernel.mcp")
READ_BYTES = 65536
POLL_SECS = 0.5  # how often the draining thread looks whether the pipe was closed under it
MAX_LOGGED_LINE = 2000  # characters of one stderr line in the log


class StderrTail:
    """The write end (`writer`, given to the server's process) and the kept tail of what it wrote."""

    def __init__(self, server: str, keep: int) -> None:
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        self.server = server
        self.writer: TextIO = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self._read_fd: int | None = read_fd
        self._keep = keep
        self._tail = bytearray()
        self._partial = bytearray()  # a line not ended yet, for the log
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, name=f"mcp-stderr-{server}", daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        return self._read_fd is None

    def text(self) -> str:
        """The last `keep` bytes the server wrote, as text (what is still in the pipe included)."""
        with self._lock:
            self._read_available()
            return self._tail.decode("utf-8", errors="replace")

    def close(self) -> None:
        """Close our write end (the process holds its own) and stop reading; safe to call twice."""
        if not self.writer.closed:
            self.writer.close()
        with self._lock:
            if self._read_fd is not None:
                self._read_available()
                os.close(self._read_fd)
                self._read_fd = None

    def _drain(self) -> None:
        while True:
            fd = self._read_fd
            if fd is None:
                return
            try:
                ready, _, _ = select.select([fd], [], [], POLL_SECS)
            except (OSError, ValueError):  # closed by `close` meanwhile
                return
            if ready:
                with self._lock:
                    if self._read_available():
                        return

    def _read_available(self) -> bool:
        """Read what the pipe holds now (under the lock); True at its end (every writer closed)."""
        if self._read_fd is None:
            return True
        while True:
            try:
                chunk = os.read(self._read_fd, READ_BYTES)
            except BlockingIOError:
                return False
            except OSError:
                return True
            if not chunk:
                self._log_lines(final=True)
                return True
            self._tail += chunk
            del self._tail[: -self._keep]
            self._partial += chunk
            self._log_lines(final=False)

    def _log_lines(self, *, final: bool) -> None:
        *lines, rest = self._partial.split(b"\n")
        if final and rest:
            lines, rest = [*lines, rest], bytearray()
        self._partial = bytearray(rest[-MAX_LOGGED_LINE * 4 :])
        for line in lines:
            text = line.decode("utf-8", errors="replace").rstrip()
            if text:
                log.info("MCP server %s: %s", self.server, text[:MAX_LOGGED_LINE])


__all__ = ["StderrTail"]

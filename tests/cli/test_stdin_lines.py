"""Piped lines read through the descriptor, and Ctrl-C ending the wait whichever thread takes it."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import threading
from collections.abc import Iterator
from typing import TextIO

import pytest

from agentkernel.cli.stdin_lines import StdinLines


@pytest.fixture
def pipe() -> Iterator[tuple[TextIO, int]]:
    """A pipe: its read side as a text stream (what `sys.stdin` is under a pipe), its write side's fd."""
    read_fd, write_fd = os.pipe()
    stream = os.fdopen(read_fd, "r", encoding="utf-8")
    try:
        yield stream, write_fd
    finally:
        stream.close()
        with contextlib.suppress(OSError):  # the test closed it (end of input)
            os.close(write_fd)


def all_lines(data: bytes, *, chunks: int = 1) -> list[str]:
    """What StdinLines reads of `data`, written in `chunks` pieces (a line may be cut anywhere)."""
    read_fd, write_fd = os.pipe()
    lines = StdinLines(os.fdopen(read_fd, "r", encoding="utf-8"))
    size = max(1, len(data) // chunks)
    for start in range(0, len(data), size):
        os.write(write_fd, data[start : start + size])
    os.close(write_fd)
    found = []
    while (line := lines.line()) is not None:
        found.append(line)
    lines.stream.close()
    return found


@pytest.mark.parametrize("chunks", [1, 3, 1000])
def test_lines_end_as_a_text_streams_do_cut_anywhere(chunks: int) -> None:
    data = "раз\nдва\r\nтри\rчетыре\n\nпять".encode()  # a multi-byte letter may be cut in two
    assert all_lines(data, chunks=chunks) == ["раз", "два", "три", "четыре", "", "пять"]
    assert all_lines(b"", chunks=chunks) == []
    assert all_lines(b"\n", chunks=chunks) == [""]
    assert all_lines(b"last\r", chunks=chunks) == ["last"]


def test_a_stream_without_a_descriptor_is_read_by_lines() -> None:
    lines = StdinLines(io.StringIO("a\r\nb"))
    assert [lines.line(), lines.line(), lines.line()] == ["a", "b", None]


def test_a_line_waits_for_its_end(pipe: tuple[TextIO, int]) -> None:
    stream, write_fd = pipe
    lines = StdinLines(stream)
    writer = threading.Timer(0.3, lambda: os.write(write_fd, b" and the rest\n"))
    os.write(write_fd, b"first\nhalf")
    writer.start()
    assert lines.line() == "first"
    assert lines.line() == "half and the rest"
    writer.join()


def test_ctrl_c_taken_by_another_thread_ends_the_wait(pipe: tuple[TextIO, int]) -> None:
    """The kernel may hand a process's SIGINT to any thread that does not block it: the main
    thread, waiting for a line, must raise KeyboardInterrupt all the same (readline() would wait
    for the next line, and raise only once one came: this test sends one after 20 s, so the old
    way fails, not hangs)."""
    stream, write_fd = pipe
    lines = StdinLines(stream)
    rescued = threading.Event()

    def rescue() -> None:
        rescued.set()
        os.write(write_fd, b"a line that unblocks a read() nothing interrupted\n")

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # however pytest was started
    other = threading.Timer(0.2, lambda: signal.pthread_kill(threading.get_ident(), signal.SIGINT))
    late = threading.Timer(20, rescue)
    other.start()
    late.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            lines.line()
        assert not rescued.is_set()  # the wait ended by itself, not by the line
    finally:
        other.join()
        late.cancel()
        signal.signal(signal.SIGINT, previous)

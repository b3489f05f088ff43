"""A stdio MCP server's stderr (issue 16): bounded whatever it writes, its last words quoted, lines logged."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from agentkernel.tools.sources.mcp.stderr_tail import StderrTail


def run_writing(tail: StderrTail, code: str) -> None:
    """A real child process whose stderr is the tail's pipe, waited for."""
    subprocess.run([sys.executable, "-c", code], stderr=tail.writer, check=True, timeout=60)


def test_a_chatty_server_keeps_only_the_tail_and_its_last_words(caplog: pytest.LogCaptureFixture) -> None:
    tail = StderrTail("chatty", keep=1000)
    try:
        with caplog.at_level(logging.INFO, logger="agentkernel.mcp"):
            # 2 MB of log lines, then the words that explain the exit: the last thing written
            run_writing(tail, "import sys\nfor i in range(20_000): print('x' * 99, file=sys.stderr)\n"
                        "sys.stderr.write('fatal: no config file')")  # fmt: skip
            text = tail.text()  # at once: what the pipe still holds is read now, not left to the thread
        assert text.endswith("fatal: no config file") and len(text.encode()) <= 1000
        logged = [r.getMessage() for r in caplog.records if r.name == "agentkernel.mcp"]
        assert logged[0] == "MCP server chatty: " + "x" * 99
    finally:
        tail.close()
    assert tail.closed and tail.text().endswith("fatal: no config file")  # kept after closing
    tail.close()  # twice is fine


def test_a_line_longer_than_the_log_takes_is_cut_and_text_survives_bad_utf8(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tail = StderrTail("odd", keep=64)
    try:
        with caplog.at_level(logging.INFO, logger="agentkernel.mcp"):
            run_writing(tail, "import os; os.write(2, b'y' * 10000 + b'\\n' + b'bad \\xff byte')")
            assert tail.text().endswith("bad \ufffd byte")
            tail.close()  # the end of the pipe: its last line, not ended by a newline, is logged too
        logged = [r.getMessage() for r in caplog.records if r.name == "agentkernel.mcp"]
        assert logged == ["MCP server odd: " + "y" * 2000, "MCP server odd: bad \ufffd byte"]
    finally:
        tail.close()

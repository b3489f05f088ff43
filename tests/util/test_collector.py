"""The collector paused over a command's start-up and its exit (agentkernel/util/collector.py)."""

from __future__ import annotations

import gc
from pathlib import Path

from agentkernel.util.collector import collector_paused
from tests.util.test_after_import import run_fresh


def test_paused_within_and_as_it_was_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():  # nested: the outer one starts it again
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # off by the host's choice: left off
    finally:
        gc.enable()


def test_started_again_when_the_start_up_fails() -> None:
    try:
        with collector_paused():
            raise ImportError("no such module")
    except ImportError:
        pass
    assert gc.isenabled()


EXIT_PROBE = """
import atexit, contextlib, gc, io, sys
from agentkernel.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main({argv!r})
enabled = gc.isenabled()
atexit._run_exitfuncs()  # what the interpreter runs as it ends, before its last collections
print(code, enabled, gc.get_freeze_count() > 0)
"""


def exit_state(argv: list[str]) -> str:
    """The command's exit code, whether the collector ran after it, and whether the process's
    exit handlers left what was alive to the modules' teardown (frozen)."""
    return run_fresh(EXIT_PROBE.format(argv=argv))


def test_a_command_that_ends_with_its_answer_skips_the_exits_collections(tmp_path: Path) -> None:
    script = tmp_path / "one.rhai"
    script.write_text("print(1)")
    assert exit_state(["rhai", "run", str(script)]) == "0 True True"
    assert exit_state(["tool", "list"]) == "0 True True"


def test_other_commands_exit_as_python_does(tmp_path: Path) -> None:
    assert exit_state(["init", str(tmp_path / "project")]) == "0 True False"

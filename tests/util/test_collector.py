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


START_UP_PROBE = """
import contextlib, gc, io, sys
from agentkernel.cli.main import main
sys.argv = ["agentkernel", *{argv!r}]
with contextlib.redirect_stdout(io.StringIO()):
    code = main({given})
print(code, gc.get_freeze_count() > 0, gc.isenabled())
"""


def start_up_state(argv: list[str], *, own: bool) -> str:
    """The command's exit code, whether its start-up was frozen (before any exit handler ran), and
    whether the collector runs: `own`, run as the process's command line (`main()`), else handed
    its `argv` as a test or a program does."""
    return run_fresh(START_UP_PROBE.format(argv=argv, given="" if own else repr(argv)))


def test_a_process_whose_command_ends_with_its_answer_freezes_its_start_up(tmp_path: Path) -> None:
    script = tmp_path / "one.rhai"
    script.write_text("print(1)")
    assert start_up_state(["rhai", "run", str(script)], own=True) == "0 True True"
    assert start_up_state(["tool", "list"], own=True) == "0 True True"
    assert start_up_state(["tool", "list"], own=False) == "0 False True"  # the caller's process
    assert start_up_state(["init", str(tmp_path / "project")], own=True) == "0 False True"


def test_the_freeze_is_asked_for_once_and_applies_at_a_pauses_end() -> None:
    out = run_fresh(
        """
        import gc
        from agentkernel.util.collector import collector_paused, frozen_after_start_up
        with collector_paused():
            pass
        before = gc.get_freeze_count()
        frozen_after_start_up()
        frozen_after_start_up()
        kept = [object() for _ in range(3)]
        with collector_paused():
            kept.append([])
        print(before, gc.get_freeze_count() > 0, gc.isenabled())
        """
    )
    assert out == "0 True True"

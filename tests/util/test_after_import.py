"""A function run right after a module's first import (agentkernel/util/after_import.py), and the
command line's log set-up that relies on it: applied before anything can log, and only if it can."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import REPO


def run_fresh(code: str) -> str:
    """What `code` prints in an interpreter of its own (a first import happens once a process)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_then_runs_once_after_the_modules_code_before_the_importer_has_it() -> None:
    out = run_fresh(
        """
        import sys
        from agentkernel.util.after_import import after_import
        seen = []
        after_import("colorsys", lambda: seen.append(hasattr(sys.modules["colorsys"], "rgb_to_hsv")))
        assert "colorsys" not in sys.modules and seen == []
        import colorsys
        import colorsys as again
        import inspect
        assert inspect.getsource(colorsys.rgb_to_hsv).startswith("def rgb_to_hsv")  # the loader's own
        print(seen, colorsys.__spec__.name, colorsys.rgb_to_hsv(1, 0, 0))
        """
    )
    assert out == "[True] colorsys (0.0, 1.0, 1)"


def test_then_runs_at_once_when_the_module_is_imported_already() -> None:
    from agentkernel.util.after_import import after_import

    seen: list[str] = []
    after_import("sys", lambda: seen.append("now"))
    assert seen == ["now"]


def test_the_log_set_up_waits_for_logging_and_is_then_what_it_was() -> None:
    out = run_fresh(
        """
        import sys
        from agentkernel.cli.common import setup_logging
        setup_logging(1, "text")
        assert "logging" not in sys.modules
        import logging
        root = logging.getLogger()
        [handler] = root.handlers
        print(logging.getLevelName(root.level), handler.stream is sys.stderr, handler.formatter._fmt,
              logging.getLevelName(logging.getLogger("agentkernel.script").level))
        """
    )
    assert out == "INFO True %(levelname)s %(name)s: %(message)s INFO"

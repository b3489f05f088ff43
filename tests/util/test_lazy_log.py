"""A logger got from `logging` on first use (agentkernel/util/lazy_log.py): the same records, and below
the levels its logger can have, dropped without importing `logging` as `logging` itself drops them."""

from __future__ import annotations

import logging

import pytest

from agentkernel.util.lazy_log import DEBUG, ERROR, INFO, WARNING, LazyLogger
from tests.util.test_after_import import run_fresh


def test_a_lazy_logger_is_the_named_logger(caplog: pytest.LogCaptureFixture) -> None:
    lazy = LazyLogger("agentkernel.lazy_test")
    with caplog.at_level(logging.INFO, logger="agentkernel.lazy_test"):
        lazy.debug("not this")
        lazy.info("info %s", 1)
        lazy.warning("warning %s", 2)
        try:
            raise ValueError("boom")
        except ValueError:
            lazy.exception("caught")
    assert lazy.logger is logging.getLogger("agentkernel.lazy_test")
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("agentkernel.lazy_test", INFO, "info 1"),
        ("agentkernel.lazy_test", WARNING, "warning 2"),
        ("agentkernel.lazy_test", ERROR, "caught"),
    ]
    assert caplog.records[-1].exc_info is not None
    assert (DEBUG, INFO, WARNING, ERROR) == (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR)


@pytest.mark.parametrize("verbosity", [None, 0, 1, 2])
def test_before_logging_is_imported_a_logger_answers_as_it_will_after(verbosity: int | None) -> None:
    """Without a set-up (a library: the root's WARNING) and with the command line's at each `-v`:
    what each logger says it would log before `logging` is imported is what it logs after."""
    out = run_fresh(
        f"""
        import sys
        from agentkernel.cli.common import setup_logging
        from agentkernel.util.lazy_log import LazyLogger
        verbosity = {verbosity!r}
        if verbosity is not None:
            setup_logging(verbosity, "text")
        names = ["agentkernel.dispatch", "agentkernel.script", "agentkernel.script.sub",
                 "agentkernel.tools.catalog", "agentkernel.tools", "other"]
        def answers():
            return [LazyLogger(n).isEnabledFor(level) for n in names for level in (10, 20, 30, 40, 50)]
        before = answers()
        LazyLogger("agentkernel.dispatch").debug("dropped")
        LazyLogger("agentkernel.dispatch").info("dropped or not")
        imported = "logging" in sys.modules
        import logging
        print(imported, before == answers(), sum(before))
        """
    )
    imported, same, enabled = out.split()
    assert same == "True"
    assert imported == str(verbosity is not None and verbosity > 0)  # an info line is logged with -v
    assert int(enabled) == {None: 18, 0: 19, 1: 24, 2: 30}[verbosity]


def test_a_tool_run_imports_no_logging() -> None:
    """`agentkernel tool run` of a tool that logs nothing: its debug line is dropped unimported."""
    out = run_fresh(
        """
        import contextlib, io, sys
        from agentkernel.cli.main import main
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            code = main(["tool", "run", "text_stats", '{"text": "Привет, мир"}'])
        print(code, "logging" in sys.modules, '"success": true' in printed.getvalue())
        """
    )
    assert out == "0 False True"

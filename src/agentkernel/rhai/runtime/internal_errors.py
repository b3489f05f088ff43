"""A failure of the interpreter itself (a Python exception in a native or in generated code), logged.

The script sees a catchable `internal error`; the host's log, under the
`agentkernel.rhai` logger, gets the traceback. `logging` is imported when
the first one happens: with what it imports, it would be a good part of
`agentkernel rhai run`'s start-up, which logs nothing.
"""

from __future__ import annotations

LOGGER = "agentkernel.rhai"


def log_internal_error(message: str, exc: BaseException) -> None:
    """Log `message` with `exc`'s traceback at ERROR."""
    import logging

    logging.getLogger(LOGGER).error(message, exc_info=exc)


__all__ = ["LOGGER", "log_internal_error"]

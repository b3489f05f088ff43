"""A module's logger, got from `logging` when it first logs: a command that logs nothing never imports it.

`logging` (with `traceback`, `string`, `textwrap` and `weakref`) is about
2.5 ms of `agentkernel tool run`'s start-up, and a tool run that goes well
logs nothing; the modules on its path (the catalog, the dispatch path, the
helper table, the approval gate, telemetry) hold a `LazyLogger` where they
held `logging.getLogger(name)`. It is that same logger, asked for on the
first call: records, levels, handlers and `caplog` are `logging`'s own.
The command line's log set-up runs when `logging` is first imported
(util/after_import.py), so before the first record is handled.

A record below a level its logger could have is dropped without importing
`logging` (the dispatch path's debug line of every tool call): until
`logging` is imported no logger has a level of its own, so each is at the
root's WARNING, or at the level the command line's set-up will give it when
`logging` is imported (`plan_levels`, the one table that set-up applies).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    import logging
    from collections.abc import Mapping
    from typing import Any

# logging's level numbers (fixed by its API), for callers that must name one without importing it
DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40

_planned: dict[str, int] = {}  # logger name ("" the root) -> the level a pending set-up gives it


def plan_levels(levels: Mapping[str, int]) -> None:
    """The levels a set-up will give these loggers ("" the root) when `logging` is first imported
    (cli/common.py). The root's is the first plan's: `logging.basicConfig` sets it once."""
    root = _planned.get("", levels.get("", WARNING))
    _planned.update(levels)
    _planned[""] = root


def _level_before_logging(name: str) -> int:
    """A logger's effective level while `logging` is not imported: its nearest planned ancestor's."""
    while name:
        if name in _planned:
            return _planned[name]
        name = name.rpartition(".")[0]
    return _planned.get("", WARNING)


class LazyLogger:
    """`logging.getLogger(name)`, got on first use; the logging calls the kernel makes, forwarded."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._logger: logging.Logger | None = None

    @property
    def logger(self) -> logging.Logger:
        """The logger itself (`logging` imported now if it was not yet)."""
        if self._logger is None:
            import logging

            self._logger = logging.getLogger(self.name)
        return self._logger

    def debug(self, msg: object, *args: object, **kwargs: Any) -> None:
        if self.isEnabledFor(DEBUG):
            self.logger.debug(msg, *args, **kwargs)

    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        if self.isEnabledFor(INFO):
            self.logger.info(msg, *args, **kwargs)

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        self.logger.warning(msg, *args, **kwargs)

    def error(self, msg: object, *args: object, **kwargs: Any) -> None:
        self.logger.error(msg, *args, **kwargs)

    def exception(self, msg: object, *args: object, **kwargs: Any) -> None:
        self.logger.exception(msg, *args, **kwargs)

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        self.logger.log(level, msg, *args, **kwargs)

    def isEnabledFor(self, level: int) -> bool:
        """`Logger.isEnabledFor` (logging's own name); asked without importing `logging` while it
        is not imported."""
        if self._logger is None and "logging" not in sys.modules:
            return level >= _level_before_logging(self.name)
        return self.logger.isEnabledFor(level)


__all__ = ["DEBUG", "ERROR", "INFO", "WARNING", "LazyLogger", "plan_levels"]

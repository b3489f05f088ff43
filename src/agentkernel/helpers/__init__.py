"""The helper functions scripts call (S8–S20), registered into one table.

Each module here holds the helpers of one service; `default_helper_table`
is the table every engine binds.
"""

from __future__ import annotations

from agentkernel.helpers import (
    cron,
    delegation,
    duck,
    files,
    http,
    identity,
    llm,
    memory,
    shell,
    state,
    usage,
)
from agentkernel.helpers.table import HelperTable


def default_helper_table() -> HelperTable:
    """A fresh table holding every built-in helper."""
    table = HelperTable()
    for area in (identity, http, shell, files, state, duck, llm, usage, memory, delegation, cron):
        area.register(table)
    return table


__all__ = ["default_helper_table"]

"""The helper functions scripts call (S8–S20), registered into one table.

Each module here holds the helpers of one service; `default_helper_table`
is the table every engine binds, which imports a module when a script first
calls one of its helpers.
"""

from __future__ import annotations

import importlib
from functools import partial

from agentkernel.helpers.table import HelperTable

# each module of helpers → the helpers its `register` adds, in the order scripts see them
# (tests/helpers/test_init.py holds each tuple to its module)
AREAS: dict[str, tuple[str, ...]] = {
    "identity": ("caller", "env_var"),
    "http": ("http_get", "http_post", "http_put", "http_patch", "http_delete", "http"),
    "shell": ("shell", "exec"),
    "files": ("fs_read", "fs_write", "fs_list", "fs_read_bytes", "fs_write_bytes"),
    "state": (
        "state_get",
        "state_set",
        "state_delete",
        "state_keys",
        "state_push",
        "state_range",
        "state_sadd",
        "state_smembers",
        "state_srem",
    ),
    "duck": ("db_execute", "db_query", "db_schema"),
    "llm": ("llm", "llm_json"),
    "usage": ("usage",),
    "memory": ("memory_history", "memory_search", "memory_count"),
    "delegation": ("call_tool", "list_tools", "get_tool_result", "run_subagent"),
    "cron": ("schedule_cron", "cancel_cron", "list_cron"),
}


def default_helper_table() -> HelperTable:
    """A fresh table holding every built-in helper: each module's are registered (and the
    module imported) when a script first calls one of them."""
    table = HelperTable()
    for area, names in AREAS.items():
        table.register_later(names, partial(register_area, area))
    return table


def register_area(area: str, table: HelperTable) -> None:
    """Import the helpers' module `area` and register its helpers into `table`."""
    importlib.import_module(f"{__name__}.{area}").register(table)


__all__ = ["AREAS", "default_helper_table", "register_area"]

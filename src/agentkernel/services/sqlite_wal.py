"""Switching a SQLite file to WAL safely when several processes open it at once."""

from __future__ import annotations

import sqlite3
import time

RETRY_SECS = 0.01


def enable_wal(conn: sqlite3.Connection, wait_secs: float) -> None:
    """Put the file in WAL mode, retrying for up to `wait_secs`.

    A journal-mode change answers SQLITE_BUSY at once, without the busy
    handler, while another process opens the same fresh file; once the file
    is WAL (a lasting property of the file) this is a plain read.
    """
    deadline = time.monotonic() + wait_secs
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(RETRY_SECS)

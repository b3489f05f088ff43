"""The kernel's message store, opened on first use: a kernel that never records (a tool run with no
session) leaves no file, opens no connection, and imports neither SQLite nor the transcript's code
(services/memory.py, opened by the first record read or written)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from agentkernel.ports import Entry, MessageStore, Owner, Record
from agentkernel.util.later import Later


class ClosableMessageStore(MessageStore, Protocol):
    """A message store the kernel closes (`SqliteMessageStore`, memory_pg.py's `PostgresMessageStore`)."""

    def close(self) -> None: ...


class LazyMessageStore:
    """A message store opened on first use, so a kernel that never records leaves no file (nor
    connection): a SqliteMessageStore on `path`, or what `opener` makes (the PostgreSQL one)."""

    def __init__(self, path: Path | str, opener: Callable[[], ClosableMessageStore] | None = None) -> None:
        self.path = path
        self._store: Later[ClosableMessageStore] = Later(opener or self._sqlite)

    def _sqlite(self) -> ClosableMessageStore:
        from agentkernel.services.memory import SqliteMessageStore  # SQLite: by the first record

        return SqliteMessageStore(self.path)

    @property
    def store(self) -> ClosableMessageStore:
        store = self._store.get()
        assert store is not None, "a message store's opener returns one"
        return store

    @property
    def opened(self) -> bool:
        return self._store.built() is not None

    def append(
        self,
        session_id: str,
        role: str,
        kind: str,
        content: str,
        meta: dict[str, Any] | None = None,
        *,
        user_id: str | None = None,
        lease: str | None = None,
    ) -> int:
        return self.store.append(session_id, role, kind, content, meta, user_id=user_id, lease=lease)

    def append_step(
        self,
        session_id: str,
        entries: Sequence[Entry],
        *,
        user_id: str | None = None,
        lease: str | None = None,
        run_id: str | None = None,
        run_update: Mapping[str, Any] | None = None,
        notes: Mapping[int, Mapping[str, Any]] | None = None,
    ) -> list[int]:
        return self.store.append_step(
            session_id,
            entries,
            user_id=user_id,
            lease=lease,
            run_id=run_id,
            run_update=run_update,
            notes=notes,
        )

    def run_records(self, run_id: str, after: int = 0, most: int = 500) -> list[Record]:
        return self.store.run_records(run_id, after, most)

    def changes(self, session_id: str, after: int, *, owner: Owner | None = None) -> tuple[int, int]:
        return self.store.changes(session_id, after, owner=owner)

    def changes_at_once(
        self, session_id: str, after: int, *, owner: Owner | None = None
    ) -> tuple[int, int] | None:
        """None until the store is opened (opening reads, and may migrate, the file)."""
        store = self._store.built()
        return None if store is None else store.changes_at_once(session_id, after, owner=owner)

    def history(
        self,
        session_id: str,
        n: int,
        *,
        owner: Owner | None = None,
        max_bytes: int | None = None,
        timeout: float | None = None,
    ) -> list[Record]:
        return self.store.history(session_id, n, owner=owner, max_bytes=max_bytes, timeout=timeout)

    def search(
        self,
        session_id: str,
        query: str,
        k: int,
        *,
        owner: Owner | None = None,
        max_bytes: int | None = None,
        window: int | None = None,
        timeout: float | None = None,
    ) -> list[Record]:
        return self.store.search(
            session_id, query, k, owner=owner, max_bytes=max_bytes, window=window, timeout=timeout
        )

    def count(self, session_id: str, *, owner: Owner | None = None, timeout: float | None = None) -> int:
        return self.store.count(session_id, owner=owner, timeout=timeout)

    def delete_session(self, session_id: str) -> int:
        return self.store.delete_session(session_id)

    def close(self) -> None:
        store = self._store.built()
        if store is not None:
            store.close()


__all__ = ["ClosableMessageStore", "LazyMessageStore"]

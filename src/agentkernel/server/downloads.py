"""Files a tool made, offered for download behind an opaque id (S6.2).

A `file` block's `path` is a place on the server's disk chosen by a
script, and scripts are untrusted, so it never leaves the server and is
honoured only where a script may write: **`path` names a regular file in
the session's scratch folder** (`caller().temp_dir`, where `fs_write`
writes), relative to it (`"report.csv"`, as `fs_write` takes it) or
absolute inside it (as `fs_write` returns it). Nothing else is offered: not
the project, not another user's or session's scratch folder, not a call
with no session (it has no scratch folder).

- **At sealing** (`seal_files`, where a block leaves the server:
  sealing.py) the path is reduced to names below the folder by text alone
  (`..` may not climb out, an absolute path must lie inside; the rules of
  `fs_write`, confined.py), then opened by the same race-free walk reads
  use: every name below the folder, the file too, without following a
  symbolic link, wherever it points. It must be a regular file with no
  other hard link. Then `{owner, session, folder, names, name, mime}` is
  stored (sealed_ids.py: a random id, its SHA-256 kept, one 404 for
  unknown, expired and another user's ids) and the block carries
  `download: {id, url}` instead of `path`.
- **At download** (`open_download`) the same walk runs again from the
  folder's parent, the session folder itself opened without following a
  link too, so a file swapped for a link after sealing, or a folder on the
  way, is refused, and the descriptor read is the one checked.
- A path that fails either check is refused with a reason that shows no
  path of the server's (`FileRefused`): at sealing the block loses its
  path, and is dropped with a warning as visual.py drops a malformed block,
  unless it also has a `url`, which it keeps; at download the answer is
  the same 404 as for an unknown id.

Why a field of its own (`download`) and not `url`: a client sends its
bearer token to `download.url`, which is always this server's; a block's
`url` is wherever a script said, and a token must never go there. A
script's own `download` field is removed, so only the server writes one.
A download id lives as long as a continuation id
(`server.continuation_ttl_secs`), and no longer than the file: the scratch
clean-up removes a folder idle for `files.scratch_ttl_hours`, and the id
then answers 404.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agentkernel.server.sealed_ids import SealedIdStore, SealedMethods, SealedTable, sealed_schema
from agentkernel.services.confined import NotFound, PathRefused, names_below, open_below
from agentkernel.types import JSONValue, VisualBlock
from agentkernel.util.short_text import shown_value

DOWNLOAD_PREFIX = "/v1/files/"  # + the id: the endpoint (routes/files.py)
SERVER_FIELDS = ("path", "download")  # what a file block never carries out as the script wrote it

_COLUMNS = (
    "session_id TEXT NOT NULL",
    "folder TEXT NOT NULL",  # the session's scratch folder, absolute
    "path TEXT NOT NULL",  # the file's names below it, joined by `/`
    "name TEXT NOT NULL",  # the block's `name`: what the file is saved as
    "mime TEXT",  # the block's `mime`, as the script gave it
)
_FIELDS = tuple(column.split()[0] for column in _COLUMNS)


class FileRefused(Exception):
    """A block's path may not be offered; the text says why and shows no server path."""


@dataclass(frozen=True)
class Download:
    """One file offered for download: whose it is, where it lies, and what to call it."""

    owner: str
    session_id: str
    folder: Path  # the session's scratch folder
    names: tuple[str, ...]  # the file, below `folder`
    name: str
    mime: str | None
    created_at: float


class DownloadRows(Protocol):
    """Where downloads are kept: the message store's SQLite file (`DownloadStore`) or the store database
    (sealed_ids_pg.py, kernel.yaml `store.url`)."""

    ttl_secs: float

    def put(
        self,
        *,
        owner: str,
        session_id: str,
        folder: Path,
        names: Sequence[str],
        name: str,
        mime: str | None = None,
        now: float | None = None,
    ) -> str: ...

    def get(self, download_id: object, owner: str, now: float | None = None) -> Download | None: ...

    def purge(self, now: float | None = None) -> int: ...

    def count(self) -> int: ...

    def close(self) -> None: ...


class DownloadMethods(SealedMethods):
    """`put` and `get` of a download, for both databases (the rules are sealed_ids.py's)."""

    table = "downloads"
    what = "download"
    columns = _COLUMNS

    def put(
        self: SealedTable,
        *,
        owner: str,
        session_id: str,
        folder: Path,
        names: Sequence[str],
        name: str,
        mime: str | None = None,
        now: float | None = None,
    ) -> str:
        """Keep a download for `owner`; its new opaque id."""
        if not owner or not session_id or not names or not folder.is_absolute():
            raise ValueError(
                f"a download needs an owner, a session, an absolute folder and a file below it; got "
                f"owner {owner!r}, session {session_id!r}, folder {str(folder)!r}, names {list(names)!r}"
            )
        # no text of PostgreSQL's holds a NUL: a media type with one is none (never sent, routes/files.py),
        # and a name's is shown as U+FFFD, in either database
        kept_mime = None if mime is None or "\x00" in mime else mime
        kept = (session_id, str(folder), "/".join(names), name.replace("\x00", "\ufffd"), kept_mime)
        row = dict(zip(_FIELDS, kept, strict=True))
        return self._insert(owner, row, now)

    def get(self: SealedTable, download_id: object, owner: str, now: float | None = None) -> Download | None:
        """The download `download_id` of `owner`; None when unknown, expired or another user's."""
        found = self._lookup(download_id, owner, _FIELDS, now)
        if found is None:
            return None
        session_id, folder, path, name, mime, created_at = found
        return Download(owner, session_id, Path(folder), tuple(path.split("/")), name, mime, created_at)


class DownloadStore(DownloadMethods, SealedIdStore):
    """Downloads in the message store's SQLite file; the rules of sealed_ids.py."""

    schema = sealed_schema(DownloadMethods.table, DownloadMethods.what, _COLUMNS)


# -- the checks: at sealing and at download ----------------------------------------------------------


def locate(folder: Path | None, path: str) -> tuple[str, ...]:
    """The names below `folder` of the regular file `path` means, checked now; FileRefused otherwise."""
    if folder is None:
        raise FileRefused("the call ran in no session, so there is no scratch folder to offer it from")
    try:
        names = tuple(names_below(folder, path))
    except PathRefused as exc:
        raise FileRefused("its path is not a file in the session's scratch folder") from exc
    handle, _ = open_file(folder, names)
    os.close(handle)
    return names


def open_file(folder: Path, names: Sequence[str]) -> tuple[int, int]:
    """A read-only descriptor of the regular file `folder/names…`, and its size; FileRefused otherwise.

    Walked from `folder`'s parent, so the session folder too is opened
    without following a link, and so is every name below it (confined.py).
    """
    try:
        handle = open_below(folder.parent, [folder.name, *names], "/".join(names))
    except NotFound as exc:
        raise FileRefused("there is no such file in the session's scratch folder") from exc
    except PathRefused as exc:
        raise FileRefused(
            "its path leads through a symbolic link (never followed) or through something not a folder"
        ) from exc
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused("its path names a folder or a special file, not a regular file")
        if info.st_nlink != 1:
            raise FileRefused("the file has other hard links, which may lead out of the scratch folder")
    except BaseException:
        os.close(handle)
        raise
    return handle, info.st_size


def open_download(download: Download) -> tuple[int, int]:
    """The file of `download`, checked again now: (descriptor, size); FileRefused when it may not be read."""
    return open_file(download.folder, download.names)


# -- sealing the blocks ----------------------------------------------------------------------------


def has_file_block(visual: JSONValue | Sequence[VisualBlock]) -> bool:
    """True when `visual` holds a `file` block (whose `path` or `download` must not leave as it is)."""
    return isinstance(visual, list) and any(
        isinstance(block, dict) and block.get("type") == "file" for block in visual
    )


def seal_files(
    visual: Sequence[VisualBlock] | None,
    store: DownloadRows,
    *,
    owner: str,
    session_id: str | None,
    folder: Path | None,
) -> tuple[list[VisualBlock], list[str]]:
    """A copy of `visual` fit to leave the server, and warnings: each file's `path` becomes `download`.

    See the module docstring for what a path may name. Every other block is
    passed on as it is; blocks are copied one level deep.
    """
    sealed: list[VisualBlock] = []
    warnings: list[str] = []
    for index, block in enumerate(visual or ()):
        if block.get("type") != "file":
            sealed.append(block)
            continue
        copy = {k: v for k, v in block.items() if k not in SERVER_FIELDS}
        path = block.get("path")
        if not isinstance(path, str):
            sealed.append(copy)
            continue
        try:
            names = locate(folder if session_id else None, path)
        except FileRefused as refused:
            shown = f"file block {shown_value(block.get('name'))}: {refused}"
            if "url" in copy:
                sealed.append(copy)
                warnings.append(f"visual[{index}]: {shown}; only its url is kept")
            else:
                warnings.append(f"visual[{index}] dropped: {shown}")
            continue
        assert folder is not None and session_id is not None  # locate refuses a call with no session
        name, mime = block.get("name"), block.get("mime")
        new_id = store.put(
            owner=owner,
            session_id=session_id,
            folder=folder,
            names=names,
            name=name if isinstance(name, str) else names[-1],
            mime=mime if isinstance(mime, str) else None,
        )
        copy["download"] = {"id": new_id, "url": DOWNLOAD_PREFIX + new_id}
        sealed.append(copy)
    return sealed, warnings


__all__ = [
    "DOWNLOAD_PREFIX",
    "Download",
    "DownloadMethods",
    "DownloadRows",
    "DownloadStore",
    "FileRefused",
    "has_file_block",
    "locate",
    "open_download",
    "open_file",
    "seal_files",
]

"""`fs_read`, `fs_write`, `fs_list`, `fs_read_bytes`, `fs_write_bytes` (S14): files for scripts.

All five throw on error (S14.1), a HelperError naming the helper and the
path. Writes land only inside the caller's session temp dir, with the
contract's texts (S14.2) `fs_write: path … outside the session temp dir` and
`no temp dir …`; reads come only from the read roots and that same temp dir
(S14.3). The identity, and so the temp dir, comes from the Caller, never
from the script.
What may be read and written, and how, is the `FilesService`'s business
(services/files.py, services/confined.py); this module checks the script's
arguments and converts text and base64. In a trace (S26.1) a call is a span
named after the helper, with neither the path nor the contents.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agentkernel.errors import HelperError
from agentkernel.helpers.table import HelperTable, ScriptCall, Traced
from agentkernel.identity import scratch_made
from agentkernel.ports import FILES, Files
from agentkernel.services.confined import PathRefused, show_path
from agentkernel.types import JSONValue
from agentkernel.util.short_text import shown_value

_WHITESPACE = re.compile(r"\s+")


def fs_read(call: ScriptCall, path: JSONValue) -> JSONValue:
    """The UTF-8 text of a file in a read root or the temp dir; relative paths start at the kernel root."""
    data = _read("fs_read", call, path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HelperError(
            f"fs_read: {show_path(str(path))} is not UTF-8 text "
            f"(bad byte at offset {exc.start:,}); use fs_read_bytes"
        ) from exc


def fs_read_bytes(call: ScriptCall, path: JSONValue) -> JSONValue:
    """The bytes of a file as standard base64."""
    return base64.b64encode(_read("fs_read_bytes", call, path)).decode("ascii")


def fs_list(call: ScriptCall, path: JSONValue) -> JSONValue:
    """The entries of a folder, sorted by name; folders end in `/`."""
    service = _service("fs_list", call)
    with _refusals("fs_list"):
        return list(service.list_folder(_path("fs_list", path), _temp_dir(call)))


def fs_write(call: ScriptCall, path: JSONValue, content: JSONValue) -> JSONValue:
    """Write UTF-8 text below the session temp dir; returns the absolute path written."""
    if not isinstance(content, str):
        raise HelperError(f"fs_write: content must be a string, got {_kind(content)}")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise HelperError(f"fs_write: content is not valid Unicode (lone surrogate at {exc.start})") from exc
    return write_scratch_file("fs_write", call, path, data)


def fs_write_bytes(call: ScriptCall, path: JSONValue, b64: JSONValue) -> JSONValue:
    """Write base64-encoded bytes below the session temp dir; returns the absolute path written."""
    if not isinstance(b64, str):
        raise HelperError(f"fs_write_bytes: b64 must be a base64 string, got {_kind(b64)}")
    text = _WHITESPACE.sub("", b64)
    limit = _service("fs_write_bytes", call).settings.max_write_bytes
    if len(text) // 4 * 3 > limit + 3:  # refuse before decoding a huge string
        raise HelperError(
            f"fs_write_bytes: content is about {len(text) // 4 * 3:,} bytes, "
            f"over the {limit:,}-byte limit (files.max_write_bytes)"
        )
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise HelperError(f"fs_write_bytes: b64 is not valid base64: {exc}") from exc
    return write_scratch_file("fs_write_bytes", call, path, data)


def _read(helper: str, call: ScriptCall, path: JSONValue) -> bytes:
    service = _service(helper, call)
    with _refusals(helper):
        return service.read_file(_path(helper, path), _temp_dir(call))


def write_scratch_file(helper: str, call: ScriptCall, path: JSONValue, data: bytes) -> str:
    """Write `data` below the caller's session temp dir; the absolute path written.

    Public so that the built-in Python tools (builtins/office.py) write their
    files by exactly the rules of `fs_write_bytes`: the confinement, the
    per-file limit and the scratch quota. A refusal is a HelperError whose
    text starts with `helper`.
    """
    service = _service(helper, call)
    temp_dir = call.caller.temp_dir
    if temp_dir is None:
        raise HelperError(
            f"no temp dir: {helper} writes only inside a session's temp dir, "
            "and this script runs outside a session (caller().temp_dir is null)"
        )
    with _refusals(helper):
        return service.write_file(scratch_made(Path(temp_dir)), _path(helper, path), data)


def _temp_dir(call: ScriptCall) -> Path | None:
    """The caller's session scratch folder, made if missing (a process makes it on first use)."""
    temp_dir = call.caller.temp_dir
    return scratch_made(Path(temp_dir)) if temp_dir is not None else None


def _service(helper: str, call: ScriptCall) -> Files:
    return call.caller.services.require(FILES, helper)


def _path(helper: str, path: JSONValue) -> str:
    if not isinstance(path, str):
        raise HelperError(f"{helper}: path must be a string, got {_kind(path)}")
    return path


@contextmanager
def _refusals(helper: str) -> Iterator[None]:
    """Turns the service's PathRefused into the helper's HelperError, prefixed with its name."""
    try:
        yield
    except PathRefused as exc:
        raise HelperError(f"{helper}: {exc}") from exc


def _kind(value: JSONValue) -> str:
    if value is None:
        return "null"
    return f"{type(value).__name__} {shown_value(value)}"


def register(table: HelperTable) -> None:
    for name, function in (
        ("fs_read", fs_read),
        ("fs_write", fs_write),
        ("fs_list", fs_list),
        ("fs_read_bytes", fs_read_bytes),
        ("fs_write_bytes", fs_write_bytes),
    ):
        table.register(name, function, traced=Traced())


__all__ = [
    "fs_list",
    "fs_read",
    "fs_read_bytes",
    "fs_write",
    "fs_write_bytes",
    "register",
    "write_scratch_file",
]

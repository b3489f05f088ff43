"""`GET /v1/files/{id}`: a file a tool made, streamed to its owner as an attachment that never runs (S6.2).

The id is the one a sealed `file` block carries in `download` (downloads.py
says what a block's path may name and how it is checked, at sealing and
again here). Unknown, expired and another user's ids, and a file that is
gone or was swapped for a link, all get the same 404.

The file's bytes are a script's, so the answer is made never to run on
this server's origin, whatever the file holds (an HTML page, an SVG with a
script): `Content-Disposition: attachment` (the block's name, in ASCII and
in RFC 6266's `filename*`), the block's `mime` only when it is a well-formed
media type (else `application/octet-stream`), `X-Content-Type-Options:
nosniff`, and a Content-Security-Policy that sandboxes the response and
allows it nothing, should a browser show it anyway. The file is streamed
in chunks from the descriptor that was checked, never read whole, and no
more than the size it had when opened is sent (its `Content-Length`); a
file cut short meanwhile ends the connection, so the client sees the
download incomplete at once.
"""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import Iterator
from typing import Final
from urllib.parse import quote

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from agentkernel.server.downloads import Download, FileRefused, open_download
from agentkernel.server.identity import User
from agentkernel.server.problems import CALLER, documented
from agentkernel.server.routes.continuations import sealing_of
from agentkernel.server.sealing import Sealing
from agentkernel.util.short_text import clip

router = APIRouter(prefix="/v1/files", tags=["files"], responses=documented(*CALLER))
NOT_FOUND: Final = "no such file (unknown, expired, gone, or not yours)"
OCTET_STREAM: Final = "application/octet-stream"
DOWNLOAD_POLICY: Final = "default-src 'none'; sandbox"
CHUNK_BYTES: Final = 64 * 1024
MAX_NAME_CHARS: Final = 200  # of the saved file's name, in the header

_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"  # RFC 9110's token
_MEDIA_TYPE = re.compile(rf'{_TOKEN}/{_TOKEN}(?:[ \t]*;[ \t]*{_TOKEN}=(?:{_TOKEN}|"[^"\\\x00-\x1f\x7f]*"))*')
_ASCII_NAME = re.compile(r"[^A-Za-z0-9._ ()+-]")


def media_type(mime: str | None) -> str:
    """The block's `mime` when it is a well-formed media type; `application/octet-stream` otherwise."""
    return mime if mime is not None and _MEDIA_TYPE.fullmatch(mime) else OCTET_STREAM


def content_disposition(name: str) -> str:
    """`attachment` with the name twice: plain ASCII (anything else `_`), and exact as UTF-8 (RFC 6266)."""
    shown = clip(name, MAX_NAME_CHARS)
    fallback = _ASCII_NAME.sub("_", shown).strip(" .") or "download"
    exact = quote(shown.encode("utf-8", "replace"), safe="")
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{exact}"


def _open(sealing: Sealing, download_id: str, user: str) -> tuple[Download, io.FileIO, int] | None:
    """The user's download and its file, checked now (on a worker thread); None means 404."""
    found = sealing.downloads.store().get(download_id, user)
    if found is None:
        return None
    try:
        handle, size = open_download(found)
    except FileRefused:
        return None
    return found, io.FileIO(handle, "rb", closefd=True), size


class FileShrank(Exception):
    """The file got shorter while it was sent: the response cannot be whole, so it is cut off."""


def _chunks(file: io.FileIO, size: int) -> Iterator[bytes]:
    """`size` bytes of `file`, a chunk at a time; the file is closed when they end.

    A file cut short meanwhile raises FileShrank: the server then closes the
    connection, so the client sees an incomplete download at once, rather
    than waiting for bytes its `Content-Length` promised.
    """
    try:
        left = size
        while left > 0:
            chunk = file.read(min(CHUNK_BYTES, left))
            if not chunk:
                raise FileShrank(f"a download's file lost {left:,} of its {size:,} bytes while being sent")
            left -= len(chunk)
            yield chunk
    finally:
        file.close()


@router.get(
    "/{download_id}",
    response_class=StreamingResponse,
    responses={
        200: {"content": {OCTET_STREAM: {}}, "description": "the file, as an attachment"},
        404: {"description": NOT_FOUND},
    },
)
async def download(download_id: str, request: Request, user: User) -> StreamingResponse:
    """The file of a sealed `file` block's `download.id`, if it is the caller's and still there."""
    opened = await asyncio.to_thread(_open, sealing_of(request), download_id, user)
    if opened is None:
        raise HTTPException(404, NOT_FOUND)
    found, file, size = opened
    headers = {
        "Content-Type": media_type(found.mime),
        "Content-Length": str(size),
        "Content-Disposition": content_disposition(found.name),
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": DOWNLOAD_POLICY,
        "Cross-Origin-Resource-Policy": "same-origin",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "private, no-store",
    }
    # the file is closed when the chunks end, after the response (even one the client left), or when dropped
    return StreamingResponse(_chunks(file, size), headers=headers, background=BackgroundTask(file.close))


__all__ = ["NOT_FOUND", "content_disposition", "media_type", "router"]

"""Files offered for download (S6.2, issue 11 §2-§3): what a block's `path` may name, sealed ids in the store.

The end-to-end story (a script's file, the API, the download, other users)
is tests/server/test_files_api.py; this checks the rules one by one on
real folders and a real store, with a hostile path for each way out. The
store's tests run on both: the SQLite file and the PostgreSQL database
(S27.2, tests/pg.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkernel.server.downloads import (
    DOWNLOAD_PREFIX,
    Download,
    DownloadStore,
    FileRefused,
    locate,
    open_download,
    seal_files,
)
from agentkernel.server.routes.files import content_disposition, media_type
from agentkernel.server.sealed_ids_pg import PostgresDownloadStore
from agentkernel.types import VisualBlock
from tests.server.conftest import on_postgres, raw_rows

SECRET = b"the project's secret\n"


@pytest.fixture
def place(tmp_path: Path) -> Path:
    """`tmp/alice-session` with report.csv; beside it another session's folder and a project secret."""
    folder = tmp_path / "tmp" / "alice-session"
    folder.mkdir(parents=True)
    (folder / "report.csv").write_bytes(b"a,b\n1,2\n")
    (folder / "sub").mkdir()
    (folder / "sub" / "deep.txt").write_bytes(b"deep")
    other = tmp_path / "tmp" / "bob-session"
    other.mkdir()
    (other / "theirs.csv").write_bytes(b"bob's")
    (tmp_path / "secret.txt").write_bytes(SECRET)
    return folder


Store = DownloadStore | PostgresDownloadStore


def open_store(
    where: str, *, ttl_secs: float = 24 * 3600.0, clock: Callable[[], float] | None = None
) -> Store:
    """The PostgreSQL store for a postgresql:// URL, else the SQLite one on that file."""
    more: dict[str, Any] = {} if clock is None else {"clock": clock}
    if on_postgres(where):
        return PostgresDownloadStore(where, ttl_secs=ttl_secs, **more)
    return DownloadStore(where, ttl_secs=ttl_secs, **more)


@pytest.fixture
def store(store_where: str) -> Iterator[Store]:
    with open_store(store_where) as opened:
        yield opened


def read(handle_and_size: tuple[int, int]) -> bytes:
    handle, size = handle_and_size
    try:
        return os.read(handle, size + 1)
    finally:
        os.close(handle)


# -- what a path may name ---------------------------------------------------------------------------


def test_a_path_relative_to_the_scratch_folder_or_absolute_inside_it_is_located(place: Path) -> None:
    assert locate(place, "report.csv") == ("report.csv",)
    assert locate(place, str(place / "report.csv")) == ("report.csv",)  # as fs_write returns it
    assert locate(place, "sub/../sub/./deep.txt") == ("sub", "deep.txt")  # `..` that stays inside


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../bob-session/theirs.csv", "not a file in the session's scratch folder"),  # another session
        ("../../secret.txt", "not a file in the session's scratch folder"),  # the project
        ("sub/../../bob-session/theirs.csv", "not a file in the session's scratch folder"),
        ("ABSOLUTE_SECRET", "not a file in the session's scratch folder"),  # absolute, outside
        ("ABSOLUTE_OTHER", "not a file in the session's scratch folder"),  # absolute, a sibling folder
        ("", "not a file in the session's scratch folder"),
        (".", "not a file in the session's scratch folder"),  # the folder itself
        ("sub/", "not a file in the session's scratch folder"),
        ("nul\x00.csv", "not a file in the session's scratch folder"),
        ("missing.csv", "there is no such file"),
        ("sub", "a folder or a special file"),
    ],
)
def test_paths_that_lead_anywhere_else_are_refused(place: Path, path: str, reason: str) -> None:
    path = path.replace("ABSOLUTE_SECRET", str(place.parent.parent / "secret.txt"))
    path = path.replace("ABSOLUTE_OTHER", str(place.parent / "bob-session" / "theirs.csv"))
    with pytest.raises(FileRefused, match=reason) as refused:
        locate(place, path)
    assert str(place.parent) not in str(refused.value)  # no server path in what a client may see


def test_links_are_never_followed_wherever_they_point(place: Path) -> None:
    (place / "out.csv").symlink_to(place.parent.parent / "secret.txt")
    (place / "in.csv").symlink_to(place / "report.csv")  # even a link that stays inside
    (place / "outdir").symlink_to(place.parent / "bob-session", target_is_directory=True)
    for path in ("out.csv", "in.csv", "outdir/theirs.csv", str(place / "out.csv")):
        with pytest.raises(FileRefused, match="symbolic link"):
            locate(place, path)


def test_a_scratch_folder_that_is_itself_a_link_is_refused(place: Path, tmp_path: Path) -> None:
    swapped = tmp_path / "tmp" / "swapped"
    swapped.symlink_to(place, target_is_directory=True)
    with pytest.raises(FileRefused, match="symbolic link"):
        locate(swapped, "report.csv")


def test_a_hard_link_and_a_fifo_are_refused(place: Path, tmp_path: Path) -> None:
    os.link(tmp_path / "secret.txt", place / "hard.txt")
    with pytest.raises(FileRefused, match="other hard links"):
        locate(place, "hard.txt")
    os.mkfifo(place / "pipe")
    with pytest.raises(FileRefused, match="special file"):  # and opening it did not block
        locate(place, "pipe")


def test_no_session_means_no_folder_to_offer_from() -> None:
    with pytest.raises(FileRefused, match="no session"):
        locate(None, "report.csv")


# -- sealing the blocks -------------------------------------------------------------------------------


def test_sealing_swaps_the_path_for_a_download_id_and_leaves_other_blocks(place: Path, store: Store) -> None:
    visual: list[VisualBlock] = [
        {"type": "text", "text": "hi"},
        {"type": "file", "name": "report.csv", "mime": "text/csv", "path": "report.csv"},
    ]
    sealed, warnings = seal_files(visual, store, owner="ann", session_id="s1", folder=place)
    assert warnings == []
    assert sealed[0] is visual[0]
    block = sealed[1]
    assert set(block) == {"type", "name", "mime", "download"} and "path" in visual[1]  # a copy
    download = block["download"]
    assert isinstance(download, dict) and set(download) == {"id", "url"}
    assert download["url"] == DOWNLOAD_PREFIX + str(download["id"])
    found = store.get(download["id"], "ann")
    assert found is not None
    assert (found.owner, found.session_id, found.folder, found.names) == ("ann", "s1", place, ("report.csv",))
    assert (found.name, found.mime) == ("report.csv", "text/csv")
    assert read(open_download(found)) == b"a,b\n1,2\n"
    assert store.get(download["id"], "bob") is None  # another user's: as unknown


def test_a_refused_path_drops_the_block_with_a_warning_or_keeps_its_url(place: Path, store: Store) -> None:
    outside = str(place.parent.parent / "secret.txt")
    visual: list[VisualBlock] = [
        {"type": "file", "name": "secret.txt", "path": outside},
        {"type": "file", "name": "both.txt", "path": "../x", "url": "https://example.org/x"},
        {"type": "file", "name": "theirs.csv", "url": "https://example.org/y", "download": {"url": "/v1/x"}},
    ]
    sealed, warnings = seal_files(visual, store, owner="ann", session_id="s1", folder=place)
    assert sealed == [
        {"type": "file", "name": "both.txt", "url": "https://example.org/x"},
        {"type": "file", "name": "theirs.csv", "url": "https://example.org/y"},  # a script's own dropped
    ]
    assert warnings == [
        "visual[0] dropped: file block 'secret.txt': its path is not a file in the session's scratch folder",
        "visual[1]: file block 'both.txt': its path is not a file in the session's scratch folder; "
        "only its url is kept",
    ]
    assert store.count() == 0


def test_a_call_with_no_session_offers_no_file(place: Path, store: Store) -> None:
    visual: list[VisualBlock] = [{"type": "file", "name": "r.csv", "path": "report.csv"}]
    sealed, warnings = seal_files(visual, store, owner="ann", session_id=None, folder=place)
    assert sealed == [] and warnings == [
        "visual[0] dropped: file block 'r.csv': the call ran in no session, "
        "so there is no scratch folder to offer it from"
    ]


# -- at download time -------------------------------------------------------------------------------


def sealed_download(store: Store, place: Path, path: str) -> Download:
    """Seal a block naming `path` for ann, and read its row back."""
    sealed, warnings = seal_files(
        [{"type": "file", "name": "f", "path": path}], store, owner="ann", session_id="s", folder=place
    )
    download = sealed[0]["download"]
    assert warnings == [] and isinstance(download, dict)
    found = store.get(download["id"], "ann")
    assert found is not None
    return found


def test_a_file_swapped_for_a_link_after_sealing_is_refused(place: Path, store: Store) -> None:
    found = sealed_download(store, place, "report.csv")
    (place / "report.csv").unlink()
    (place / "report.csv").symlink_to(place.parent.parent / "secret.txt")
    with pytest.raises(FileRefused, match="symbolic link"):
        open_download(found)
    (place / "report.csv").unlink()
    with pytest.raises(FileRefused, match="no such file"):
        open_download(found)


def test_a_scratch_folder_swapped_for_a_link_after_sealing_is_refused(
    place: Path, store: Store, tmp_path: Path
) -> None:
    found = sealed_download(store, place, "sub/deep.txt")
    (place / "sub").rename(tmp_path / "elsewhere")
    (place / "sub").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(FileRefused, match="symbolic link"):
        open_download(found)
    place.rename(tmp_path / "moved")
    place.symlink_to(tmp_path / "moved", target_is_directory=True)
    with pytest.raises(FileRefused, match="symbolic link"):
        open_download(found)


# -- the store ---------------------------------------------------------------------------------------


def test_ids_expire_and_survive_a_reopening(store_where: str, place: Path) -> None:
    clock = [1000.0]
    with open_store(store_where, ttl_secs=60, clock=lambda: clock[0]) as store:
        kept = store.put(owner="ann", session_id="s", folder=place, names=["report.csv"], name="r.csv")
        stored = raw_rows(store_where, "SELECT key, owner, session_id, folder, path, name FROM downloads")
        assert len(kept) >= 32 and len(stored) == 1 and kept not in stored[0]  # only its hash
    with open_store(store_where, ttl_secs=60, clock=lambda: clock[0]) as store:
        assert store.get(kept, "ann") is not None
        clock[0] += 60
        assert store.get(kept, "ann") is None  # expired: the same None as unknown
        assert store.purge() == 1 and store.count() == 0


def test_bad_rows_are_refused_with_the_reason(store: Store, place: Path) -> None:
    with pytest.raises(ValueError, match="absolute folder"):
        store.put(owner="ann", session_id="s", folder=Path("rel"), names=["x"], name="x")
    with pytest.raises(ValueError, match="an owner"):
        store.put(owner="", session_id="s", folder=place, names=["x"], name="x")
    assert store.get("x" * 101, "ann") is None and store.get(None, "ann") is None
    assert store.get("\ud800", "ann") is None and store.get("é" * 32, "ann") is None  # not ours: no error


def test_a_nul_in_a_name_or_a_media_type_is_kept_as_no_text_of_postgresql_could_hold(
    store: Store, place: Path
) -> None:
    """A script may write "\\u0000" in a block's name or mime; the same row on either database: the name's
    NUL shown as U+FFFD, a media type with one none at all (it would never be sent)."""
    kept = store.put(
        owner="ann", session_id="s", folder=place, names=["report.csv"], name="a\x00b", mime="text/csv\x00"
    )
    found = store.get(kept, "ann")
    assert found is not None and (found.name, found.mime) == ("a\ufffdb", None)


# -- the response's headers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mime", "sent"),
    [
        ("text/csv", "text/csv"),
        ("text/csv; charset=utf-8", "text/csv; charset=utf-8"),
        ('text/plain; format="flowed"', 'text/plain; format="flowed"'),
        (None, "application/octet-stream"),
        ("csv", "application/octet-stream"),
        ("text/html\r\nSet-Cookie: a=b", "application/octet-stream"),
        ("text/csv; charset=", "application/octet-stream"),
    ],
)
def test_only_a_well_formed_media_type_is_sent(mime: str | None, sent: str) -> None:
    assert media_type(mime) == sent


@pytest.mark.parametrize(
    ("name", "header"),
    [
        ("report.csv", "attachment; filename=\"report.csv\"; filename*=UTF-8''report.csv"),
        (
            "отчёт 1.csv",
            "attachment; filename=\"_____ 1.csv\"; filename*=UTF-8''%D0%BE%D1%82%D1%87%D1%91%D1%82%201.csv",
        ),
        (
            'a";\r\nx: y/../b',
            "attachment; filename=\"a____x_ y_.._b\"; filename*=UTF-8''a%22%3B%0D%0Ax%3A%20y%2F..%2Fb",
        ),
        ("\ud800.txt", "attachment; filename=\"_.txt\"; filename*=UTF-8''%3F.txt"),
        ("...", "attachment; filename=\"download\"; filename*=UTF-8''..."),
    ],
)
def test_the_saved_name_is_encoded_safely(name: str, header: str) -> None:
    assert content_disposition(name) == header
    assert content_disposition("x" * 10_000).count("x") < 500  # a long name is cut

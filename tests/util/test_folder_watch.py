"""FolderWatch: says whether anything changed in its folders since the last look, without waiting."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from agentkernel.util.folder_watch import FolderWatch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


def test_each_change_is_seen_by_the_next_look_and_only_by_it(tmp_path: Path) -> None:
    watch = FolderWatch()
    assert watch.changed()  # nothing watched yet: it cannot tell
    watch.watch([tmp_path])
    assert watch.changed()  # the first look after watching (a change may predate the watch)
    assert not watch.changed()
    (tmp_path / "a.yaml").write_text("x")
    assert watch.changed()
    assert not watch.changed()
    (tmp_path / "a.yaml").rename(tmp_path / "b.yaml")
    assert watch.changed()
    (tmp_path / "b.yaml").unlink()
    assert watch.changed()
    (tmp_path / "sub").mkdir()
    assert watch.changed()
    (tmp_path / "sub" / "c.yaml").write_text("x")  # a subfolder is not watched unless named
    assert not watch.changed()
    watch.close()
    assert watch.changed()  # closed: it cannot tell any more


def test_two_watches_of_one_folder_each_see_a_change(tmp_path: Path) -> None:
    first, second = FolderWatch(), FolderWatch()
    for watch in (first, second):
        watch.watch([tmp_path])
        watch.changed()
    (tmp_path / "a.yaml").write_text("x")
    assert first.changed() and second.changed()
    first.close()
    (tmp_path / "a.yaml").write_text("y")
    assert second.changed()  # the folder's watch stays while another watcher has it
    second.close()


def test_a_folder_that_cannot_be_watched_leaves_it_blind(tmp_path: Path) -> None:
    watch = FolderWatch()
    watch.watch([tmp_path, tmp_path / "missing"])
    for _ in range(3):
        assert watch.changed()
    watch.watch([tmp_path])
    watch.changed()
    assert not watch.changed()
    watch.close()


def _child_sees_its_own_changes_only_through_its_own_watch(parents: FolderWatch, folder: Path) -> bool:
    """In a forked child: the parent's watch cannot tell (reading its events would steal the
    parent's), and a watch made here works."""
    if not parents.changed():
        return False
    mine = FolderWatch()
    mine.watch([folder])
    mine.changed()
    (folder / "child.yaml").write_text("x")
    return mine.changed() and not mine.changed() and parents.changed()


def test_a_forked_child_has_its_own_watches_and_leaves_the_parents_events(tmp_path: Path) -> None:
    watch = FolderWatch()
    watch.watch([tmp_path])
    watch.changed()
    pid = os.fork()
    if pid == 0:  # the child: its verdict is its exit status
        ok = False
        try:
            ok = _child_sees_its_own_changes_only_through_its_own_watch(watch, tmp_path)
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert watch.changed()  # the child's file, seen by the parent's watch
    assert not watch.changed()
    watch.close()

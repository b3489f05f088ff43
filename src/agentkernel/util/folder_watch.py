"""Whether anything changed in some folders since the last look, from Linux's inotify, never waiting.

The kernel reloads its script folders without a restart by scanning them (a
`stat` of every file) at each listing. A `FolderWatch` lets a scan be skipped
while nothing changed: the kernel queues an inotify event before the write,
rename, create or delete that causes it returns, so a change made before a
look starts is seen by that look (no delay, unlike a watcher that polls or
reads events on a thread of its own). Events are read without blocking, when
asked.

One inotify instance serves the whole process (the system allows a user 128),
each watch telling the folders' watchers apart by the watch's id. Where a
watch cannot be had (not Linux, no instance or watch left, a process forked
from the one that made the instance) or the event queue overflowed, `changed`
answers True: the caller scans, as without a watch. A change inotify cannot
see (a file system mounted over the network, edited from another machine;
a file edited through a hard link in an unwatched folder) is seen by the
caller's own rescan now and then (`RESCAN_SECS`).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# <sys/inotify.h>
_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF, _IN_ONLYDIR = 0x400, 0x800, 0x01000000
_IN_Q_OVERFLOW, _IN_IGNORED = 0x4000, 0x8000
_IN_NONBLOCK, _IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
    | _IN_ONLYDIR
)
RESCAN_SECS = 1.0  # a watched folder is still looked at this often: what the watch cannot see
_EVENT = "iIII"  # wd, mask, cookie, len (then `len` bytes of name): a `struct` format


class _Process:
    """This process's id, kept without a system call per look (set again in a forked child)."""

    pid = os.getpid()

    @classmethod
    def forked(cls) -> None:
        cls.pid = os.getpid()


os.register_at_fork(after_in_child=_Process.forked)


class _Inotify:
    """The process's inotify instance: watches by folder, and which watchers each watch serves."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pid = -1
        self.fd: int | None = None
        self._add: Any = None  # libc's inotify_add_watch, inotify_rm_watch
        self._rm: Any = None
        self._queued: Any = None  # a poll of the instance: whether events wait, without reading them
        self.watchers: dict[int, set[FolderWatch]] = {}  # watch id → the watchers of its folder

    def ready(self) -> bool:
        """The instance of this process, made on first use; False where there can be none."""
        if self.fd is not None and self.pid == _Process.pid:
            return True
        if self.pid == _Process.pid or not sys.platform.startswith("linux"):
            return False  # tried in this process already, and failed
        if self.fd is not None:  # a forked child's copy of its parent's: reading it would steal the events
            os.close(self.fd)
        self.pid, self.fd, self.watchers = _Process.pid, None, {}
        import ctypes  # when a catalog first scans: a tool run's start-up never pays for it
        import select

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            init, self._add, self._rm = libc.inotify_init1, libc.inotify_add_watch, libc.inotify_rm_watch
        except (OSError, AttributeError):
            return False
        self._add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        fd = init(_IN_NONBLOCK | _IN_CLOEXEC)
        self.fd = fd if fd >= 0 else None
        if self.fd is not None:
            self._queued = select.poll()
            self._queued.register(self.fd, select.POLLIN)
        return self.fd is not None

    def add(self, folder: Path) -> int | None:
        """The watch of `folder` (the same id each time for one folder); None when none can be had."""
        assert self.fd is not None and self._add is not None
        wd = int(self._add(self.fd, os.fsencode(folder), _MASK))
        return wd if wd >= 0 else None

    def remove(self, wd: int) -> None:
        assert self.fd is not None and self._rm is not None
        self._rm(self.fd, wd)

    def drain(self) -> None:
        """Read every queued event, marking the watchers of each event's folder changed (a poll
        first: most looks find none, and a read that finds none costs an exception)."""
        assert self.fd is not None
        if not self._queued.poll(0):
            return
        import struct  # by the first look that finds events: a command that looks once never watches

        event = struct.Struct(_EVENT)
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return
            offset = 0
            while offset < len(data):
                wd, mask, _, size = event.unpack_from(data, offset)
                offset += event.size + size
                if mask & _IN_Q_OVERFLOW:  # events were lost: every watcher looks again
                    for watchers in self.watchers.values():
                        for watcher in watchers:
                            watcher.dirty = True
                    continue
                for watcher in self.watchers.get(wd, ()):
                    watcher.dirty = True
                if mask & _IN_IGNORED:  # the folder is gone: so is its watch
                    self.watchers.pop(wd, None)


_INOTIFY = _Inotify()


class FolderWatch:
    """Watches a set of folders (not their subfolders: name each); `changed()` says whether anything
    in them changed since the last `changed()`, True until `watch` has been called."""

    def __init__(self) -> None:
        self.dirty = True
        self._blind = True  # some folder of the last `watch` has no watch: every look says True
        self._wds: set[int] = set()
        self._pid = _Process.pid

    def watch(self, folders: Iterable[Path]) -> None:
        """Watch `folders`: every folder that matters, each time (those watched already stay). While a
        folder of the last call cannot be watched (gone, not a folder, no watch left), `changed` says
        True."""
        with _INOTIFY.lock:
            self._blind = not _INOTIFY.ready()
            if self._blind:
                return
            for folder in folders:
                wd = _INOTIFY.add(folder)
                if wd is None:
                    self._blind = True
                    continue
                self._wds.add(wd)
                _INOTIFY.watchers.setdefault(wd, set()).add(self)

    def changed(self) -> bool:
        """Whether anything changed in the watched folders since the last call (True the first time,
        and whenever the watch cannot tell)."""
        with _INOTIFY.lock:
            if self._blind or self._pid != _Process.pid or not _INOTIFY.ready():
                return True
            _INOTIFY.drain()
            changed, self.dirty = self.dirty, False
            return changed

    def close(self) -> None:
        """Stop watching; a folder no other watcher watches loses its watch."""
        with _INOTIFY.lock:
            if self._pid != _Process.pid or _INOTIFY.fd is None or _INOTIFY.pid != self._pid:
                return
            for wd in self._wds:
                watchers = _INOTIFY.watchers.get(wd)
                if watchers is None:
                    continue
                watchers.discard(self)
                if not watchers:
                    del _INOTIFY.watchers[wd]
                    _INOTIFY.remove(wd)
            self._wds.clear()
            self.dirty = self._blind = True


__all__ = ["FolderWatch"]

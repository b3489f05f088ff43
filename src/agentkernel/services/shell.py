"""The shell service (S13): runs one program at a time per slot, bounded in time and output.

Scripts are untrusted and many run at once, so a process started for a
script must never outlive its call, never fill the kernel's memory and never
block a worker thread past its deadline:

- each process leads a new session (and so a new process group); when the
  call ends — on timeout, or because the program exited while children it
  put in the background still run — the whole group gets SIGKILL;
- stdout and stderr are read together by one selector loop, each kept up to
  `max_output_bytes` and the rest read and dropped, so a flood neither grows
  memory nor blocks the child on a full pipe;
- stdin is /dev/null, so a program waiting for input sees end-of-file at once;
- at most `max_concurrent` processes run across the kernel; a call waits for
  a slot only as long as its own timeout allows.

A program's exit is watched through a pidfd (Linux) without reaping it, so
the group id cannot be reused by an unrelated process before it is killed.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentkernel.config import KernelConfig, ShellSettings

_READ_CHUNK = 65536
#: How long output is still read after the group was killed: only processes that left the
#: group (setsid, double fork) can keep the pipes open longer, and they are not waited for.
_DRAIN_GRACE_SECS = 0.5
#: How long to wait for a SIGKILLed leader to be reaped.
_REAP_SECS = 5.0
#: Poll interval where no pidfd exists (non-Linux POSIX).
_POLL_SECS = 0.02


@dataclass(frozen=True)
class ProcessOutcome:
    """What one run gave: an exit code, or why there is none, and the output.

    `exit_code` is None when the program was killed on timeout (`timed_out`),
    could not start or did not get a slot (`failure` says which, in words).
    """

    exit_code: int | None
    stdout: str
    stderr: str
    failure: str | None = None
    timed_out: bool = False


class _Capture:
    """One output stream: the first `limit` bytes kept, the rest only counted."""

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self) -> str:
        """UTF-8 text (bad bytes replaced); a character cut by the limit is left out whole."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        text = decoder.decode(bytes(self.data), final=self.dropped == 0)
        if self.dropped:
            text += f"\n[{self.name} truncated: {self.dropped:,} more bytes over the limit of {self.limit:,}]"
        return text


class _ExitWatch:
    """Tells when the program exited, without reaping it (its pid stays its group's id)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.fd: int | None = None
        if hasattr(os, "pidfd_open"):
            try:
                self.fd = os.pidfd_open(process.pid)
            except OSError:  # an old kernel: fall back to polling
                self.fd = None

    def exited(self) -> bool:
        if hasattr(os, "waitid"):
            try:
                info = os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return True
            return info is not None
        return self.process.poll() is not None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class ShellService:
    """Runs programs for scripts within the kernel-wide limits of `ShellSettings`."""

    def __init__(self, settings: ShellSettings | None = None, *, default_cwd: Path | None = None) -> None:
        self.settings = settings or ShellSettings()
        self.default_cwd = default_cwd
        self._slots = threading.BoundedSemaphore(self.settings.max_concurrent)

    @classmethod
    def from_config(cls, config: KernelConfig) -> ShellService:
        """The service for kernel.yaml's `shell:` section; outside a session commands run in `root`."""
        return cls(config.shell, default_cwd=config.root)

    def run(
        self, argv: Sequence[str], *, timeout: float, cwd: Path | None, env: Mapping[str, str]
    ) -> ProcessOutcome:
        """Run `argv` (no shell involved) for at most `timeout` seconds, waiting for a slot included."""
        deadline = time.monotonic() + timeout
        if not self._slots.acquire(timeout=timeout):
            return ProcessOutcome(
                None,
                "",
                "",
                f"no free process slot within {round(timeout, 2):g}s "
                f"({self.settings.max_concurrent} already running: shell.max_concurrent)",
            )
        try:
            return self._run_in_slot(argv, deadline, cwd or self.default_cwd, env)
        finally:
            self._slots.release()

    def _run_in_slot(
        self, argv: Sequence[str], deadline: float, cwd: Path | None, env: Mapping[str, str]
    ) -> ProcessOutcome:
        try:
            process = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=dict(env),
                start_new_session=True,
                close_fds=True,
            )
        except (OSError, ValueError) as exc:
            return ProcessOutcome(None, "", "", _start_failure(argv[0], cwd, exc))
        stdout = _Capture("stdout", self.settings.max_output_bytes)
        stderr = _Capture("stderr", self.settings.max_output_bytes)
        timed_out = _supervise(process, deadline, stdout, stderr)
        code = _reap(process)
        if timed_out:
            return ProcessOutcome(None, stdout.text(), stderr.text(), timed_out=True)
        return ProcessOutcome(code, stdout.text(), stderr.text())


def _start_failure(program: str, cwd: Path | None, exc: Exception) -> str:
    if isinstance(exc, FileNotFoundError) and cwd is not None and not cwd.is_dir():
        return f"working folder {str(cwd)!r} does not exist"
    if isinstance(exc, FileNotFoundError):
        return f"program {program!r} not found"
    if isinstance(exc, PermissionError):
        return f"program {program!r} cannot be run: permission denied"
    if isinstance(exc, ValueError):
        return f"cannot start {program!r}: {exc}"
    strerror = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return f"cannot start {program!r}: {strerror}"


def _supervise(process: subprocess.Popen[bytes], deadline: float, stdout: _Capture, stderr: _Capture) -> bool:
    """Read both pipes until the program exits or the deadline passes; True on timeout.

    Either way the whole group is killed before the last output is drained, so
    nothing the program started keeps running after the call.
    """
    assert process.stdout is not None and process.stderr is not None
    watch = _ExitWatch(process)
    selector = selectors.DefaultSelector()
    try:
        selector.register(process.stdout, selectors.EVENT_READ, stdout)
        selector.register(process.stderr, selectors.EVENT_READ, stderr)
        if watch.fd is not None:
            selector.register(watch.fd, selectors.EVENT_READ, None)
        timed_out = not _read_until_exit(selector, watch, deadline)
        if watch.fd is not None:
            selector.unregister(watch.fd)  # stays readable from now on: drop it, or the drain spins
        _kill_group(process.pid)
        _drain(selector, time.monotonic() + _DRAIN_GRACE_SECS)
        return timed_out
    finally:
        _kill_group(process.pid)  # again, for the path where reading itself failed
        selector.close()
        watch.close()
        process.stdout.close()
        process.stderr.close()


def _read_until_exit(selector: selectors.BaseSelector, watch: _ExitWatch, deadline: float) -> bool:
    """Pump output until the program exits (True) or the deadline passes (False)."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return watch.exited()
        wait = left if watch.fd is not None else min(left, _POLL_SECS)
        for key, _ in selector.select(wait):
            if key.data is None:
                return True
            _read_once(selector, key)
        if watch.fd is None and watch.exited():
            return True


def _drain(selector: selectors.BaseSelector, until: float) -> None:
    """Read what is left in the pipes until both are closed or `until` passes."""
    while any(key.data is not None for key in selector.get_map().values()):
        left = until - time.monotonic()
        if left <= 0:
            return
        for key, _ in selector.select(left):
            if key.data is not None:
                _read_once(selector, key)


def _read_once(selector: selectors.BaseSelector, key: selectors.SelectorKey) -> None:
    chunk = os.read(key.fd, _READ_CHUNK)
    if chunk:
        key.data.add(chunk)
    else:
        selector.unregister(key.fileobj)


def _kill_group(pgid: int) -> None:
    """SIGKILL every process of the group; the leader is not reaped yet, so the id is still ours."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # gone, or only setuid members left
        os.killpg(pgid, signal.SIGKILL)


def _reap(process: subprocess.Popen[bytes]) -> int:
    """The exit code, shell-style: 128+N when a signal ended the program."""
    try:
        code = process.wait(timeout=_REAP_SECS)
    except subprocess.TimeoutExpired:  # stuck in the kernel (D state); Popen reaps it later
        return 128 + signal.SIGKILL
    return 128 - code if code < 0 else code


__all__ = ["ProcessOutcome", "ShellService", "ShellSettings"]

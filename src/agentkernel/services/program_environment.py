"""What the programs a script starts (`shell`, `exec`) may see of the kernel's environment: little.

A program gets a clean environment built from an allow list: the names
every program needs to run (`PATH`, `HOME`, the locale, the time zone, a
temp folder) plus `shell.env_allow` of kernel.yaml, minus anything denied
to `env_var` (`scripts.env_deny`, the LLM key). Nothing else is inherited,
so a variable nobody thought to deny does not leak either.

A program also runs as the kernel's user, and Linux shows every process's
initial environment in `/proc/PID/environ` to its own user (and to root):
`tr '\\0' '\\n' < /proc/$PPID/environ` would print the kernel's secrets.
So, once, before the first program starts, the kernel

- blanks the denied variables in its own initial environment block, the
  memory that `/proc/PID/environ` shows (the kernel read its environment
  into `os.environ` at start, so nothing of its own uses that block), and
- marks itself non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`, unless
  `shell.non_dumpable: false`): `/proc/PID/environ` and `/proc/PID/mem`
  then belong to root, so a program running as the kernel's user cannot
  read the kernel's memory, where `os.environ` still holds the secrets.

What remains (docs/scripts.md 8.6.3): a program running as root, or with
CAP_SYS_PTRACE, can still read the kernel's memory; so can any process of
the kernel's user that is not one of its programs, when Yama's
`ptrace_scope` allows it; and other processes that hold the secret in their
own environment (a parent shell that exported it) are not the kernel's to
clean.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping

log = logging.getLogger("agentkernel.shell")

#: Always passed to a program when the kernel has them (unless denied): what a program needs to run.
BASE_ALLOW = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR", "TERM")

_PR_SET_DUMPABLE = 4
_ENV_START_FIELD = 50  # /proc/PID/stat, 1-based (proc(5)): where the initial environment block starts
_guarded = False
_guard_lock = threading.Lock()


def program_environment(
    source: Mapping[str, str], allow: Iterable[str], is_denied: Callable[[str], bool]
) -> dict[str, str]:
    """The variables of `source` named by `allow` (names or globs) and not denied."""
    patterns = (*BASE_ALLOW, *allow)
    return {
        name: value
        for name, value in source.items()
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns) and not is_denied(name)
    }


def guard_kernel_environment(is_denied: Callable[[str], bool], *, non_dumpable: bool) -> None:
    """Keep the kernel's secrets out of its programs' reach; see the module docstring. Once per process."""
    global _guarded
    with _guard_lock:
        if _guarded:
            return
        _guarded = True
        blanked = _blank_initial_environment(is_denied)
        if blanked:
            log.info("blanked %d denied variable(s) in /proc/%d/environ", blanked, os.getpid())
        if non_dumpable:
            _set_non_dumpable()


def _blank_initial_environment(is_denied: Callable[[str], bool]) -> int:
    """Overwrite each denied `NAME=value` of the initial environment block with NULs.

    The block is written through /proc/self/mem, so a layout we do not
    expect fails with an OSError, never a crash. libc's `environ` pointers
    then see empty entries, which getenv() skips.
    """
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        start, end = (int(fields[_ENV_START_FIELD - 3 + i]) for i in (0, 1))
        with open("/proc/self/environ", "rb") as shown:
            block = shown.read()
        if len(block) != end - start:
            raise OSError(f"the environment block is {len(block)} bytes, /proc/self/stat says {end - start}")
        blanked = 0
        with open("/proc/self/mem", "r+b", buffering=0) as memory:
            offset = 0
            for entry in block.split(b"\0"):
                name, equals, _ = entry.partition(b"=")
                if equals and is_denied(name.decode("utf-8", "surrogateescape")):
                    memory.seek(start + offset)
                    memory.write(b"\0" * len(entry))
                    blanked += 1
                offset += len(entry) + 1
        return blanked
    except (OSError, ValueError, IndexError) as exc:  # not Linux, or a /proc we cannot use
        log.warning("cannot blank denied variables in the kernel's /proc environ: %s", exc)
        return 0


def _set_non_dumpable() -> None:
    import ctypes  # with `shell.non_dumpable`, not by every kernel
    import ctypes.util

    libc_name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(libc_name, use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    except (OSError, AttributeError) as exc:  # not Linux
        log.warning("cannot make the kernel non-dumpable (shell.non_dumpable): %s", exc)


__all__ = ["BASE_ALLOW", "guard_kernel_environment", "program_environment"]

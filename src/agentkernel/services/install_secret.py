"""This installation's secret: 32 random bytes in a file only its owner may read, made on first use.

It keys the HMACs that sign what the kernel hands out and must recognise
later (an approval's decision URL: services/approval_tokens.py). Decisions:

- **One secret, however many processes start at once**: each writes its
  candidate to a new file of its own (0600) and hard-links it to the final
  name; a link never replaces, so the first one wins and every other process
  reads the winner's (never a half-written file).
- **Refused, not repaired**: a file that is a link, is not the owner's, may
  be read or written by anyone else, or is not 32 bytes is an error naming
  it: a secret others could read signs nothing worth trusting, and replacing
  it silently would void every URL already sent.
- **Where**: beside the message store (the caller passes its folder), which
  no read root of the scripts may hold (config/stores.py).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from agentkernel.errors import AgentKernelError

SECRET_FILE = "secret.key"
SECRET_BYTES = 32


class SecretRefused(AgentKernelError):
    """The secret file exists but cannot be trusted (or read): what is wrong with it, and what to do."""


def install_secret(folder: Path) -> bytes:
    """The secret in `folder`/secret.key, made there (0600) when missing; SecretRefused if not usable."""
    path = folder / SECRET_FILE
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        _create(path)
    try:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
            raise SecretRefused(f"{path}: not a regular file; delete it and a new secret is made")
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise SecretRefused(
                f"{path}: others may read or change it (mode {stat.S_IMODE(info.st_mode):04o}, "
                f"owner uid {info.st_uid}); `chmod 600` it if it was never exposed, else delete it "
                "(every decision URL sent so far stops working)"
            )
        secret = path.read_bytes()
    except OSError as exc:
        raise SecretRefused(f"{path}: cannot be read: {exc.strerror}") from exc
    if len(secret) != SECRET_BYTES:
        raise SecretRefused(f"{path}: holds {len(secret)} bytes, not {SECRET_BYTES}; delete it")
    return secret


def _create(path: Path) -> None:
    """Write a new secret unless another process got there first (the link is atomic, never replaces)."""
    candidate = path.parent / f".{SECRET_FILE}.{os.getpid()}.{os.urandom(6).hex()}"
    fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(os.urandom(SECRET_BYTES))
            file.flush()
            os.fsync(file.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: theirs is the one
            os.link(candidate, path)
    finally:
        os.unlink(candidate)


__all__ = ["SECRET_BYTES", "SECRET_FILE", "SecretRefused", "install_secret"]

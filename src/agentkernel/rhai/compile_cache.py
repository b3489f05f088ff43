"""Compiled scripts on disk, so a restarted server does not compile unchanged scripts again.

An entry is keyed by the SHA-256 of the script's text, the parse options and
source name that shape the generated code, and the compiler's fingerprint
(the interpreter's own `__version__`, CPython's bytecode magic number and the
path, size and modification time of every module of the interpreter, as
jinja's bytecode cache keys by its own `bc_version` and CPython's own cache by
a source's time and size): a new version, another Python, an edited
interpreter or other limits miss and compile afresh. An entry holds what compiling produced
— the bytecode of each part (`marshal`), the line → position tables, the
constants, the functions' signatures — so a hit runs neither our front end
nor CPython's `compile()`. The functions' syntax trees (needed only to word
the hint of a failed call) are parsed again from the text on first use.

Loading bytecode is running code, so an entry is trusted only if it carries
an HMAC-SHA256, keyed by a secret of this installation, of everything in it:
a file that was truncated, corrupted, copied from another key or written by
anyone who does not hold the secret is a miss, never executed. The secret
(32 random bytes) is created in the cache folder, which is made owner-only
(0700; the secret file 0600), and is refused if anyone else may read or
write it. Whoever can read the secret can run code as this user already (it
is their own file); scripts cannot reach it, because the kernel keeps the
folder out of their read and write roots (config/stores.py).

Every failure of the cache (no space, a read-only disk, a foreign file) is
a miss or a skipped write: the cache can only save time, never change what a
script does. An entry unused for `UNUSED_DAYS` is removed when a later
compile stores one; the folder may be deleted at any time.

A hit is `agentkernel rhai run`'s start-up, so it imports little: the entry
is `marshal`led (`pickle` only for a constant marshal cannot hold), SHA-256
is the interpreter's built-in module where there is one (not OpenSSL's,
loaded by `hashlib`), and paths are strings (no `pathlib`).
"""

from __future__ import annotations

import contextlib
import marshal
import os
import stat
import threading
import time
from _operator import _compare_digest as compare_digest  # hmac.compare_digest's own fallback
from collections.abc import Callable, Sequence
from functools import cache
from importlib._bootstrap_external import MAGIC_NUMBER  # importlib.util's, without importing it
from types import CodeType

from agentkernel.rhai._version import __version__
from agentkernel.rhai.compiled import CompiledModule, Signature
from agentkernel.rhai.syntax.parse_support import ParseOptions

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from hashlib import sha256
    from typing import Any

    from agentkernel.rhai.syntax import ast
else:  # CPython's built-in SHA-256 (3.11: _sha256; 3.12 on: _sha2): `hashlib` loads OpenSSL first
    try:
        from _sha256 import sha256
    except ImportError:
        try:
            from _sha2 import sha256
        except ImportError:
            from hashlib import sha256

FORMAT = b"agentkernel-rhai-compiled 1\n"  # the first bytes of every entry
_DIGEST = 32  # SHA-256's
_BLOCK = 64  # SHA-256's block, which HMAC pads its key to
_MARSHALLED, _PICKLED = b"M", b"P"  # the first byte of a payload: how the rest is written
SECRET_FILE = "secret"
UNUSED_DAYS = 30  # an entry no compile has used for this long is removed
_COMPILER_PACKAGE = os.path.dirname(os.path.realpath(__file__))

Folder = str | os.PathLike[str]


class CachedCompile:
    """One entry: the module as compiled, and the bytecode of each of its parts (None: a
    script function compiled on its first call)."""

    def __init__(self, module: CompiledModule, codes: list[CodeType | None]) -> None:
        self.module = module
        self.codes = codes


@cache
def compiler_fingerprint() -> bytes:
    """What makes generated code differ from one install to the next: the interpreter's
    version, CPython's bytecode format, and each module of the interpreter: its path, size
    and modification time (as CPython's own cache tells a changed source)."""
    digest = sha256(__version__.encode() + MAGIC_NUMBER)
    for parts in sorted(_modules_below(_COMPILER_PACKAGE)):  # in the order of their paths' parts
        info = os.stat(os.path.join(_COMPILER_PACKAGE, *parts))
        digest.update(f"{'/'.join(parts)}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    return digest.digest()


def _modules_below(folder: str, within: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The `.py` files below `folder`, each as its path's parts from there, as
    `Path(folder).rglob("*.py")` finds them (not into linked folders), without its pattern
    compiled nor a Path made for each."""
    found: list[tuple[str, ...]] = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir() and not entry.is_symlink():
                found += _modules_below(entry.path, (*within, entry.name))
            elif entry.name.endswith(".py"):
                found.append((*within, entry.name))
    return found


class CachedModule(CompiledModule):
    """A `CompiledModule` read from the cache: its functions' trees are parsed on first use.

    The engine needs only their signatures to load the module; the trees
    serve the hints of a failed call (rhai_hints.py), so they are parsed from
    the script's text, with the same options, only when asked for.
    """

    def __init__(
        self,
        parts: list[str],
        positions: dict[int, Any],
        operator_lines: set[int],
        constants: list[Any],
        signatures: list[Signature],
        parse_functions: Callable[[], list[ast.FnDef]],
    ) -> None:
        self._signatures = signatures
        self._parse_functions = parse_functions
        self._functions: list[ast.FnDef] | None = None
        super().__init__(parts, positions, operator_lines, constants, [])

    @property
    def signatures(self) -> list[Signature]:
        return self._signatures  # as stored: the functions' trees are not parsed for them

    @property  # a field of the parent, computed here
    def functions(self) -> list[ast.FnDef]:
        if self._functions is None:
            self._functions = self._parse_functions()
        return self._functions

    @functions.setter
    def functions(self, value: list[ast.FnDef]) -> None:
        self._functions = value or None  # the parent's __init__ sets [] : parse when asked


class CompileCache:
    """A folder of compiled scripts, each file named by its key (see the module's docstring)."""

    def __init__(self, folder: Folder) -> None:
        self.folder = os.fspath(folder)

    def key(self, source: str, options: ParseOptions, source_name: str | None) -> str:
        digest = sha256(compiler_fingerprint())
        digest.update(repr((options, source_name)).encode())
        digest.update(b"\0" + source.encode("utf-8", "surrogatepass"))
        return digest.hexdigest()

    def load(self, key: str, parse_functions: Callable[[], list[ast.FnDef]]) -> CachedCompile | None:
        """The entry for `key`, or None: missing, unreadable, or not signed by our secret."""
        secret = self._secret(create=False)
        if secret is None:
            return None
        path = os.path.join(self.folder, key)
        try:
            with open(path, "rb") as file:
                data = file.read()
            os.utime(path)  # in use: not pruned (`_prune`)
        except OSError:
            return None
        payload = _verified(data, secret)
        if payload is None:
            return None
        try:
            return _entry(payload, key, parse_functions)
        except Exception:  # signed by us, yet unreadable (a bug of ours): compile afresh
            return None

    def store(self, key: str, module: CompiledModule, codes: Sequence[CodeType | None]) -> None:
        """Write the entry for `key` (atomically); a failure only means the next start compiles."""
        try:
            secret = self._secret(create=True)
            if secret is None:
                return
            entry = (
                key,
                module.parts,
                module.positions,
                module.operator_lines,
                module.constants,
                module.signatures,
                [marshal.dumps(code) for code in codes],
            )
            payload = _written(entry)
            _write_atomically(os.path.join(self.folder, key), FORMAT + _sign(payload, secret) + payload)
            self._prune()
        except Exception:  # no space, a read-only disk, a constant pickle refuses: no entry
            return

    def _prune(self) -> None:
        """Remove entries unused for `UNUSED_DAYS` (every edit of a script leaves its old
        entry behind) and files left by writers that died; at a store, i.e. a compile."""
        now = time.time()
        for name in os.listdir(self.folder):
            path = os.path.join(self.folder, name)
            age = now - os.lstat(path).st_mtime
            stale = age > UNUSED_DAYS * 86_400 or (name.startswith(".new-") and age > 3_600)
            if stale and name != SECRET_FILE:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)

    def _secret(self, *, create: bool) -> bytes | None:
        """This installation's key, made on first use; None if missing (and not `create`)
        or if anyone but the owner could read or change it."""
        path = os.path.join(self.folder, SECRET_FILE)
        try:
            if create and not os.path.exists(path):
                os.makedirs(self.folder, mode=0o700, exist_ok=True)
                if os.stat(self.folder).st_uid == os.getuid():
                    os.chmod(self.folder, 0o700)
                _create_secret(path)
            if not (_private(self.folder) and _private(path)):
                return None
            with open(path, "rb") as file:
                secret = file.read()
        except OSError:
            return None
        return secret if len(secret) == 32 else None


def _verified(data: bytes, secret: bytes) -> bytes | None:
    """The payload of an entry whose format and signature are right, else None."""
    if not data.startswith(FORMAT) or len(data) < len(FORMAT) + _DIGEST:
        return None
    signature = data[len(FORMAT) : len(FORMAT) + _DIGEST]
    payload = data[len(FORMAT) + _DIGEST :]
    return payload if compare_digest(signature, _sign(payload, secret)) else None


def _written(entry: tuple[Any, ...]) -> bytes:
    """An entry's payload: marshalled, unless a constant is of a type only `pickle` writes."""
    try:
        return _MARSHALLED + marshal.dumps(entry)
    except ValueError:  # marshal writes only the exact built-in types
        import pickle  # here: a hit on a marshalled entry (most) never pays for its import

        return _PICKLED + pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)


def _read(payload: bytes) -> Any:
    if payload[:1] == _MARSHALLED:
        return marshal.loads(payload[1:])
    if payload[:1] == _PICKLED:
        import pickle

        return pickle.loads(payload[1:])
    raise ValueError("an entry written neither by marshal nor by pickle")


def _entry(payload: bytes, key: str, parse_functions: Callable[[], list[ast.FnDef]]) -> CachedCompile | None:
    stored_key, parts, positions, operator_lines, constants, signatures, codes = _read(payload)
    if stored_key != key:  # a valid entry of another script, renamed: not this one
        return None
    module = CachedModule(parts, positions, operator_lines, constants, signatures, parse_functions)
    return CachedCompile(module, [marshal.loads(code) for code in codes])


def _sign(payload: bytes, secret: bytes) -> bytes:
    """HMAC-SHA256 of `payload` under `secret` (RFC 2104, as `hmac.new(secret, payload,
    "sha256")` computes it, without `hmac`'s import of `hashlib`)."""
    key = sha256(secret).digest() if len(secret) > _BLOCK else secret
    key = key.ljust(_BLOCK, b"\0")
    inner = sha256(key.translate(_INNER_PAD) + payload).digest()
    return sha256(key.translate(_OUTER_PAD) + inner).digest()


_INNER_PAD = bytes(byte ^ 0x36 for byte in range(256))  # each key byte XOR 0x36, by `translate`
_OUTER_PAD = bytes(byte ^ 0x5C for byte in range(256))


def _private(path: str) -> bool:
    """Owned by us, and nobody else may read or write it (links are not followed)."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return False
    return info.st_uid == os.getuid() and not info.st_mode & 0o077


def _create_secret(path: str) -> None:
    """Write a new secret unless another process got there first (link: atomic, never replaces)."""
    temporary = _write_new(os.path.dirname(path), os.urandom(32))
    try:
        with contextlib.suppress(FileExistsError):  # another process made it first: use theirs
            os.link(temporary, path)
    finally:
        os.unlink(temporary)


def _write_atomically(path: str, data: bytes) -> None:
    temporary = _write_new(os.path.dirname(path), data)
    try:
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def _write_new(folder: str, data: bytes) -> str:
    """`data` in a new owner-only file of `folder` no other writer uses (not `tempfile`:
    its import alone is a good part of `agentkernel rhai run`'s start-up)."""
    path = os.path.join(folder, f".new-{os.getpid()}-{threading.get_ident()}-{os.urandom(4).hex()}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
    except BaseException:
        os.unlink(path)
        raise
    return path


__all__ = ["CachedCompile", "CachedModule", "CompileCache", "compiler_fingerprint"]

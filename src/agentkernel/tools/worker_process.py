"""The worker process's side of tools/isolated.py: read a call, run it under its limits, answer.

A worker is a fresh interpreter (`python -I`: no environment, no current
folder on the path) holding one socket to the kernel. It imports the
modules it is told to preload, says it is ready, then serves calls one at
a time until the kernel closes its end: a call is a pickled
`(function, args, memory_bytes, cpu_secs)` from the kernel (trusted), and
the answer is a pickle of plain values only (see `reply`), which the
kernel reads with no class allowed.

Before each call the worker caps itself: its data segment (RLIMIT_DATA:
heap and private mappings) to what it holds now plus `memory_bytes`, so an
allocation past that fails here (what earlier calls left free in its heap
is reusable besides: a worker that grew by more than `_KEPT_BYTES` is
replaced after its call); and its CPU time
(RLIMIT_CPU) to `cpu_secs` more, a backstop that ends it by SIGXCPU should
the kernel be gone and unable to kill it at the deadline.

A frame on the socket is an 8-byte big-endian length and that many bytes.
"""

from __future__ import annotations

import importlib
import json
import math
import pickle
import resource
import socket
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from agentkernel.errors import ScriptError

_LENGTH_BYTES = 8
READY = b"ready"
_NEAR_BYTES = 1 << 20  # a failure with less than this (or an eighth of the call's memory) left: memory
# a worker holding more than this over what it started with is replaced: lxml's own memory settles
# ~55 MiB above it after some 20 documents; a call may use what is free of it besides its own limit
_KEPT_BYTES = 64 << 20


def send_frame(sock: socket.socket, data: bytes) -> None:
    """Write one frame: the length, then `data` (the socket's timeout bounds the whole write)."""
    sock.sendall(len(data).to_bytes(_LENGTH_BYTES, "big") + data)


class FrameTooLarge(Exception):
    """A frame longer than the reader allows."""


def receive_frame(sock: socket.socket, limit: int | None = None) -> bytes:
    """Read one frame; EOFError when the other end closed, FrameTooLarge when it is over `limit` bytes."""
    length = int.from_bytes(_receive_exactly(sock, _LENGTH_BYTES), "big")
    if limit is not None and length > limit:
        raise FrameTooLarge(f"a frame of {length:,} bytes, over {limit:,}")
    return _receive_exactly(sock, length)


def _receive_exactly(sock: socket.socket, count: int) -> bytes:
    buffer = bytearray(count)
    view = memoryview(buffer)
    done = 0
    while done < count:
        got = sock.recv_into(view[done:], count - done)
        if got == 0:
            raise EOFError("the other end closed the connection")
        done += got
    return bytes(buffer)


def serve(fd: int, preload: Sequence[str]) -> None:
    """The worker's life: preload, say ready, answer calls until the kernel's end closes."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU (the CPU backstop) leaves no core file
    for name in preload:
        importlib.import_module(name)
    baseline = data_bytes()  # what the worker holds of its own once its modules are in
    sock = socket.socket(fileno=fd)
    send_frame(sock, READY)
    while True:
        try:
            request = receive_frame(sock)
        except (EOFError, OSError):
            return
        function, args, memory_bytes, cpu_secs = pickle.loads(request)
        send_frame(sock, reply(function, args, data_bytes() + memory_bytes, cpu_secs, baseline))


def reply(
    function: Callable[..., Any], args: Sequence[Any], cap: int, cpu_secs: float, baseline: int
) -> bytes:
    """`function(*args)` run with at most `cap` bytes of data and `cpu_secs` more CPU, as plain values.

    `(kind, value, keep)`: `("ok", value)`; `("error", message)` for a
    ScriptError the function raised (a refusal its caller should see as it
    is); `("memory", detail)` when an allocation failed, which C code does
    not always report as MemoryError (lxml: "unknown error", CPython:
    SystemError), so any failure with little of `cap` left counts;
    `("crash", "Type: message")` for anything else, its traceback on stderr
    (the kernel's log). `keep` is False once the worker holds much more than
    `baseline` (what it started with): its next call's cap would count what
    this one left, so a fresh worker takes over.
    """
    _cap(cap, cpu_secs)
    try:
        answer: tuple[str, Any] = ("ok", function(*args))
    except MemoryError:
        answer = ("memory", "an allocation failed (MemoryError)")
    except ScriptError as exc:
        answer = ("error", str(exc))
    except Exception as exc:
        if cap - data_bytes() < max((cap - baseline) // 8, _NEAR_BYTES):  # its frames still hold its data
            answer = ("memory", f"an allocation failed near the limit ({type(exc).__name__}: {exc})")
        else:
            traceback.print_exc(file=sys.stderr)
            answer = ("crash", f"{type(exc).__name__}: {exc}")
    finally:
        _uncap()
    keep = data_bytes() <= baseline + _KEPT_BYTES
    try:
        return pickle.dumps((*answer, keep), protocol=pickle.HIGHEST_PROTOCOL)
    except MemoryError:
        return pickle.dumps(("memory", "an allocation failed while answering (MemoryError)", False))


def _cap(data: int, cpu_secs: float) -> None:
    used = resource.getrusage(resource.RUSAGE_SELF)
    _set_soft(resource.RLIMIT_CPU, math.ceil(used.ru_utime + used.ru_stime + cpu_secs))
    _set_soft(resource.RLIMIT_DATA, data)


def _uncap() -> None:
    _set_soft(resource.RLIMIT_DATA, resource.RLIM_INFINITY)
    _set_soft(resource.RLIMIT_CPU, resource.RLIM_INFINITY)


def _set_soft(kind: int, value: int) -> None:
    """The soft limit `kind` at `value`, never above the hard limit the worker was started with."""
    hard = resource.getrlimit(kind)[1]
    if hard != resource.RLIM_INFINITY and (value == resource.RLIM_INFINITY or value > hard):
        value = hard
    resource.setrlimit(kind, (value, hard))


def data_bytes() -> int:
    """What RLIMIT_DATA counts now: the process's data segment and private writable mappings (VmData)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # no /proc: the peak resident size


def main(fd: str, preload: str) -> None:
    """The entry tools/isolated.py's bootstrap calls: the socket's descriptor, the modules as JSON."""
    serve(int(fd), json.loads(preload))


__all__ = ["READY", "FrameTooLarge", "data_bytes", "main", "receive_frame", "reply", "send_frame", "serve"]

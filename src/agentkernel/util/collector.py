"""No cyclic garbage collection over a command's start-up and its exit: what it imported lives on.

Importing builds tens of thousands of objects that live as long as the
process (modules, classes, functions, tables); the collections their
allocation triggers walk them all and find next to nothing (about 1 % of
`agentkernel rhai run`'s and `tool run`'s instructions: docs/benchmarks.md). The command
line pauses the collector while it parses its arguments and imports what the
command needs, and starts it again before the command's work (a script run,
a server), which may make cyclic garbage. As `rhai/engine.py` does while it
compiles (a copy of its own: the Rhai library imports nothing of agentkernel);
a collector that was off (the host's choice) is left off.

At exit CPython collects twice over every object still alive (before and
after it empties the modules): for `rhai run` of `print(1)` some 4 ms of its
48, for `tool run` 13 ms of 100, spent finding the cycles of modules,
classes and functions the process is about to drop whole.
`uncollected_at_exit()` makes what is alive when the process ends permanent
to the collector (`gc.freeze()`, from an `atexit` handler: after the
command, its own exit handlers and the other threads are done, before those
collections), so they skip it. What the modules' teardown frees by reference
counting is freed as before; only a finalizer (`__del__`) of an object in a
reference cycle that is still alive at exit may then not run, which CPython
never promised (the data model's note on `__del__`). For the commands that
close what they open (the kernel's `with`) and end after printing their
answer (cli/main.py).
"""

from __future__ import annotations

import atexit
import gc
from contextlib import contextmanager

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Iterator


@contextmanager
def collector_paused() -> Iterator[None]:
    """Within: no cyclic garbage collection; after: as it was (garbage made meanwhile is found then)."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def uncollected_at_exit() -> None:
    """At exit, leave what is then alive to the modules' teardown, not to the cycle collector.

    Registered once however often it is asked (the tests run the command line in process)."""
    if not _registered:
        _registered.append(True)
        atexit.register(gc.freeze)


_registered: list[bool] = []

__all__ = ["collector_paused", "uncollected_at_exit"]

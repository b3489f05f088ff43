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

The same commands, run as the process's own command line, freeze what each
start-up pause leaves alive at its end (`frozen_after_start_up()`): else the
first allocation after the pause starts a collection of everything it
imported, and the older generations' collections walk it again later.
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
    """Within: no cyclic garbage collection; after: as it was (garbage made meanwhile is found then),
    what is alive then frozen first once `frozen_after_start_up()` was asked."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            if _freezing:
                gc.freeze()
            gc.enable()


def frozen_after_start_up() -> None:
    """From now on, the end of each start-up pause makes what is then alive permanent (`gc.freeze()`).

    Collections after a pause would otherwise walk everything it imported:
    at the pause's end the youngest generation holds all of it, so the first
    allocation starts a collection of it, and the next generation's follow
    (3 ms of `tool run`'s 60). For a command that ends with its answer, run
    as the process's own command line (cli/main.py): cyclic garbage made
    during its start-up is then kept to the end of the short process.
    """
    if not _freezing:
        _freezing.append(True)


_freezing: list[bool] = []


def uncollected_at_exit() -> None:
    """At exit, leave what is then alive to the modules' teardown, not to the cycle collector.

    Registered once however often it is asked (the tests run the command line in process)."""
    if not _registered:
        _registered.append(True)
        atexit.register(gc.freeze)


_registered: list[bool] = []

__all__ = ["collector_paused", "frozen_after_start_up", "uncollected_at_exit"]

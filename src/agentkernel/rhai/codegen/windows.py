"""A `for` over a range of ints counted by its own variable (`for i in 0..n`).

In a loop that counts in a local (control.py `counted_locally`), each
iteration adds its body's count to the local and tests it against the room
left to the checkpoint: two statements an iteration. Over a range of ints the
variable says how many iterations ran since the count was last settled, so an
iteration tests only `i >= last`, where `last` is the first value whose
iteration no longer fits in the room (the window's end). The count is then the
local plus `(i - start + 1) * per`: the local holds only what the body counts
on its own (a slow path, a nested loop), tested against the room the window
leaves. Past either, the count is taken exactly (`Runtime.settle_window`) and
a new window starts at the next iteration, so the limit — or a host's periodic
look at the clock — trips at the same block as counting each iteration would.

The variable must be the range's value all through the body: a body that
assigns it has no window.
"""

from __future__ import annotations

from agentkernel.rhai.syntax.records import mutable_record


@mutable_record
class Window:
    """The locals of one loop's window, and its body's count once that is compiled."""

    var: str  # the loop's variable: the range's value at each iteration
    start: str  # the local holding the value the window starts at
    last: str  # the local holding the first value past the window
    counter: str  # the loop's count local (its room: `<counter>_room`)
    per: int | None = None  # what an iteration counts (None: the body counts as usual)

    def pending(self) -> str:
        """The operations counted since the runtime last took the count."""
        return f"{self.counter} + ({self.var} - {self.start} + 1) * {self.per}"

    def entry(self, walk: str) -> str:
        """What the loop's entry sets (`walk`: the range it walks): a window from its start."""
        room = f"{self.counter}_room, {self.last} = rt.window({self.start}, {self.per})"
        return f"{self.start} = {walk}.start; {self.var} = {self.start} - 1; {room}"

    def settle(self) -> str:
        """Take the exact count (zeroed first: the runtime may raise), start a new window at
        the next iteration."""
        taken = f"{self.counter} - ({self.counter} := 0)"
        return (
            f"{self.counter} += ({self.var} - {self.start} + 1) * {self.per}; {self.start} = {self.var} + 1; "
            f"{self.counter}_room, {self.last} = rt.settle_window({taken}, {self.start}, {self.per})"
        )

    def iteration_check(self) -> str:
        return f"if {self.var} >= {self.last}: {self.settle()}"

    def hand_over(self) -> str:
        """Before a general path that counts in the runtime: the runtime takes the count."""
        return f"rt.operations += {self.pending()}; {self.counter} = 0; {self.start} = {self.var} + 1"

    def room(self) -> str:
        """After it: a new window from the next iteration."""
        return f"{self.counter}_room, {self.last} = rt.window({self.start}, {self.per})"


__all__ = ["Window"]

"""Types tested once per loop, not once per iteration (a counted loop's `type(m) is dict`).

In a loop that counts in a local (control.py `counted_locally`), a variable the
loop leaves of the type it had (analysis/loop_types.py) is tested at the loop's
entry, into a local flag, and the body's fast paths test the flag. The size
limits the body reads (`rt.sizes_checked`, `rt.map_limit`…: fixed for a
runtime's life) are read into locals there too. A `for` variable the body never
assigns has its types tested once an iteration, at the top of the body. All are
asked for while the body is compiled, and written in when it is done (onto the
loop's first line, or the body's): a flag no fast path asked for costs nothing.

A flag may also hold a setting's absence (`type(s) is str and not rt.sizes_checked`,
one test where a fast path needs both), and, for an array the loop only reads
items of, that its items are all strings (TEXT_ITEMS): an item read from it
(`words[i]`) is then known a string by that flag (`item_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from agentkernel.rhai.codegen.module import Placeholder
from agentkernel.rhai.runtime.pacing import POLL_SIZE

# the runtime's settings a loop may read once: the limits, fixed when the runtime is made
# (runtime.py), and whether the natives compiled inline are the standard ones, which a call of
# a module's function changes for its own run only (modules.py puts it back), as it does
# whether a script method `push` is defined
SETTINGS = frozenset(
    {
        "sizes_checked", "string_limit", "map_limit", "data_limit", "variable_limit",
        "natives_inline", "functions_named_push",
    }
)  # fmt: skip
Kept = tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str]]  # loop_types.StableTypes
SHORT = "short"  # a kind of its own: a string shorter than POLL_SIZE (what an inlined method takes)
TEXT_ITEMS = "text_items"  # an array of at most TEXT_ITEMS_SCAN items, all strings
TEXT_ITEMS_SCAN = 64  # the items a loop's entry looks at, at most (it may be entered often)


def _test(operand: str, kind: str, trips: str | None = None) -> str:
    """The Python test a flag of `kind` holds the result of (`trips`: the loop's iterations)."""
    if kind == SHORT:
        return f"type({operand}) is str and len({operand}) < {POLL_SIZE}"
    if kind == TEXT_ITEMS:
        size = f"len({operand})"
        bounded = f"{size} <= {TEXT_ITEMS_SCAN} and {size} <= {trips}"
        return f"type({operand}) is list and {bounded} and all_texts({operand})"
    return f"type({operand}) is {kind}"


class Assumptions:
    """The tests a copy of a loop's body was compiled assuming true (codegen/letter_walks.py),
    each once, in order: its entry tests them."""

    def __init__(self) -> None:
        self.tests: dict[str, None] = {}

    def hold(self, test: str) -> str:
        """`test` is true in the copy: it is tested once, at its entry."""
        self.tests.setdefault(f"({test})" if " " in test else test)
        return "True"


class LoopFlags:
    """The flags and settings a loop's body asked for, and what it may flag.

    What it may flag (`analyse`, `Kept`): the operand texts (plain locals) of the
    variables the loop leaves a map or an array, or a string, when they were one at
    its entry, of those strings, the ones it never appends to (their length
    stays too), and of the containers, those it only reads items of.
    """

    def __init__(
        self, analyse: Callable[[], Kept], fresh: Callable[[str], str], trips: str | None = None
    ) -> None:
        self._analyse = analyse  # run when a flag is first asked for: most loops ask for none
        # the loop's iterations, known at its entry (a `for` over a range): an array is looked
        # through (TEXT_ITEMS) only when the loop runs at least as many iterations as it has
        # items, so the look never costs more than testing each item read would
        self._trips = trips
        self._found: dict[str, frozenset[str]] | None = None
        self._fresh = fresh
        self._flags: dict[tuple[str, str, str], str] = {}  # (operand, kind, setting absent or "")
        self._settings: dict[str, str] = {}
        self._items: dict[str, str] = {}  # a temporary read from an array: that array
        self._iterating: dict[str, dict[str, str]] = {}  # a `for` variable: its kinds' flags
        self._stores: list[tuple[str, Placeholder]] = []  # a flaggable variable's store-back, and its line

    @property
    def _kept(self) -> dict[str, frozenset[str]]:
        """The operands each kind of flag may be asked of."""
        if self._found is None:
            containers, texts, fixed, items = self._analyse()
            self._found = {"dict": containers, "list": containers, "str": texts, SHORT: fixed}
            self._found[TEXT_ITEMS] = items
        return self._found

    def flaggable(self, operand: str) -> bool:
        """Whether `operand` may have flags (of a type the loop keeps it)."""
        return operand in self._kept["dict"] or operand in self._kept["str"]

    def stored(self, operand: str, line: Placeholder) -> None:
        """A method's call stored a new value into `operand` (a `Mutated` receiver) on `line`:
        its flags are tested again there (`refreshes`)."""
        self._stores.append((operand, line))

    def refreshes(self) -> Iterator[tuple[Placeholder, str]]:
        """For each store-back (`stored`), its line and what it sets there (or `pass`)."""
        for operand, line in self._stores:
            flags = [(key, flag) for key, flag in self._flags.items() if key[0] == operand]
            yield line, "; ".join(f"{flag} = {self._flag_test(*key)}" for key, flag in flags) or "pass"

    def iterate(self, operand: str) -> None:
        """`operand` is a `for` variable its body never assigns: tested once an iteration."""
        self._iterating[operand] = {}

    def iteration_tests(self, operand: str) -> str:
        """What the top of the body of `operand`'s loop sets (`q1 = type(v3_w) is str`, or
        `pass`); the variable is no longer tested once an iteration after."""
        flags = self._iterating.pop(operand)
        return "; ".join(f"{flag} = {_test(operand, kind)}" for kind, flag in flags.items()) or "pass"

    def item_of(self, item: str, array: str) -> None:
        """`item` (a temporary) was just read from `array` by index: when the loop keeps that
        array's items strings, `item` is one (`type_test(item, "str")`)."""
        self._items[item] = array

    def type_test(self, operand: str, kind: str, unless: str = "") -> str | None:
        """The flag saying `type(operand) is kind` (`dict`, `list`, `str`; SHORT: a string
        shorter than POLL_SIZE; TEXT_ITEMS) and, with `unless` (one of SETTINGS), that the
        setting is off; or None when the loop may change that."""
        iterating = self._iterating.get(operand)
        if iterating is not None:
            if kind == TEXT_ITEMS:
                return None  # not looked through once an iteration
            flag = iterating.get(kind)
            if flag is None:
                flag = iterating[kind] = self._fresh("q")
            return f"{flag} and not {self.setting(unless)}" if unless else flag
        array = self._items.get(operand)
        if array is not None and kind == "str" and self._trips is not None:
            items = self.type_test(array, TEXT_ITEMS)
            return items if items is None or not unless else f"{items} and not {self.setting(unless)}"
        if operand not in self._kept.get(kind, ()):
            return None
        key = (operand, kind, unless)
        flag = self._flags.get(key)
        if flag is None:
            if unless:
                self.setting(unless)  # read at the entry before the flag
            flag = self._flags[key] = self._fresh("p")
        return flag

    def _flag_test(self, operand: str, kind: str, unless: str) -> str:
        test = _test(operand, kind, self._trips)
        return f"{test} and not {self._settings[unless]}" if unless else test

    def setting(self, name: str) -> str:
        """The local holding `rt.<name>` (one of SETTINGS)."""
        local = self._settings.get(name)
        if local is None:
            local = self._settings[name] = self._fresh("s")
        return local

    def assignments(self) -> str:
        """What the loop's entry sets: `; p1 = type(v2_m) is dict; s3 = rt.map_limit`, or ""."""
        parts = [f"{local} = rt.{name}" for name, local in self._settings.items()]
        parts += [f"{flag} = {self._flag_test(*key)}" for key, flag in self._flags.items()]
        return "".join(f"; {part}" for part in parts)


__all__ = ["SETTINGS", "TEXT_ITEMS", "Assumptions", "Kept", "LoopFlags"]

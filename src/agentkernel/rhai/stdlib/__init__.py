"""Rhai's standard library as native Python functions (RHAI.md §13).

    lib = default_library()
    lib.call(ctx, "sub_string", ["hello", 1, 3])      # -> "ell"

One module per area registers its natives into a `Library` (a table keyed
by name and parameter types); they are imported when a library is first
filled, not with this package. Operators live in `rhai/ops.py`; `print`,
`debug`, `type_of`, `Fn`, `call`, `curry`, `eval`, `parse_json`, `exit` and
the `is_def_*`/`is_shared` functions are the compiler's.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from functools import lru_cache

from agentkernel.rhai.runtime.values import Char
from agentkernel.rhai.stdlib.registry import ANY, EXCLUSIVE, INCLUSIVE, Library, Mutated, NativeFn

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

# the modules that register natives, in registration order (a later overload of a signature wins)
_AREAS = (
    "core",
    "conversions",
    "numbers",
    "bits",
    "chars",
    "strings",
    "arrays",
    "higher_order",
    "blobs",
    "maps",
    "json_text",
    "ranges",
    "timestamps",
    "fn_ptrs",
)


def build_library() -> Library:
    """A fresh library with every standard native (for callers that add their own)."""
    lib = Library()
    for area in _AREAS:
        importlib.import_module(f"{__name__}.{area}").register(lib)
    return lib


@lru_cache(maxsize=1)
def _standard() -> Library:
    return build_library()


# The natives compiled code runs inline (codegen/inline_methods.py), by name and number of
# arguments after the receiver, each with a sample call of every signature it is inlined for:
# a host's own registration of one, or a script function of the name and arity, turns it off.
_CHAR = Char(" ")
INLINED: dict[tuple[str, int], tuple[tuple[Any, ...], ...]] = {
    ("len", 0): (("",), ([],)),
    ("is_empty", 0): (("",),),
    ("to_upper", 0): (("",),),
    ("to_lower", 0): (("",),),
    ("trim", 0): (("",),),
    ("make_upper", 0): (("",),),
    ("make_lower", 0): (("",),),
    ("contains", 1): (("", ""), ("", _CHAR)),
    ("starts_with", 1): (("", ""), ("", _CHAR)),
    ("ends_with", 1): (("", ""), ("", _CHAR)),
    ("index_of", 1): (("", ""), ("", _CHAR)),
    ("sub_string", 1): (("", 0),),
    ("sub_string", 2): (("", 0, 0),),
}
INLINED_NAMES = frozenset(INLINED)


def inlines_standard(lib: Library) -> bool:
    """Whether `lib` has the standard natives compiled code runs inline (`INLINED`, and the
    `.len` property of a string or an array): a host's own registration of one turns it off.

    Asked once per library (`Library.inline_standard`, forgotten by a registration); a
    library not filled yet answers as it was made (`default_library`), without filling.
    """
    if lib.inline_standard is None:
        from agentkernel.rhai.stdlib import arrays, strings  # filled by now: imported already

        standard = _standard()
        lib.inline_standard = (
            all(
                lib.resolve(name, sample) == standard.resolve(name, sample)
                for (name, _), samples in INLINED.items()
                for sample in samples
            )
            and lib.getter_of(str, "len") is strings.length
            and lib.getter_of(list, "len") is arrays.length
            and _is(lib.resolve("len", ("",)), strings.length)
            and _is(lib.resolve("len", ([],)), arrays.length)
            and _is(lib.resolve("trim", ("",)), strings.trim)
        )
    return lib.inline_standard


def _is(native: NativeFn | None, impl: Callable[..., Any]) -> bool:
    return native is not None and native.impl is impl


def default_library(
    then: Callable[[Library], None] | None = None, *, then_keeps_inline: bool = False
) -> Library:
    """The standard library, as a copy a caller may register its own functions into (cheap:
    the tables are copied, not rebuilt), and `then` run on it (e.g. an engine's own natives).

    Filled when first asked anything, not here: a script that calls no native
    (`print(1)`) never imports the modules of the natives. `then_keeps_inline`: `then`
    registers none of the natives compiled code runs inline (`inlines_standard`).
    """
    return _Unfilled(then, then is None or then_keeps_inline)


_FILLING = threading.Lock()


class _Unfilled(Library):
    """A `Library` not filled yet: any method first fills it, then the instance becomes a
    plain `Library` (its class is swapped), so later calls cost nothing more."""

    def __init__(self, then: Callable[[Library], None] | None, inline_standard: bool) -> None:
        super().__init__()
        self._then = then
        self.inline_standard = True if inline_standard else None  # None: asked once filled

    def _fill(self) -> None:
        with _FILLING:
            if type(self) is not _Unfilled:  # another thread filled it meanwhile
                return
            full = _standard().copy()
            if self._then is not None:
                self._then(full)
            full.pure_calls = self.pure_calls  # the dict a runtime may hold already
            del self._then
            vars(self).update(vars(full))
            object.__setattr__(self, "__class__", Library)  # from now on a plain Library


def _filling_first(name: str) -> Callable[..., Any]:
    def method(self: _Unfilled, *args: Any, **kwargs: Any) -> Any:
        self._fill()
        return getattr(self, name)(*args, **kwargs)

    method.__name__ = name
    return method


for _name, _member in vars(Library).items():
    if callable(_member) and not _name.startswith("__"):
        setattr(_Unfilled, _name, _filling_first(_name))


__all__ = [
    "ANY",
    "EXCLUSIVE",
    "INCLUSIVE",
    "INLINED",
    "INLINED_NAMES",
    "Library",
    "Mutated",
    "NativeFn",
    "build_library",
    "default_library",
    "inlines_standard",
]

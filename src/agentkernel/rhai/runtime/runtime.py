"""The state of one Rhai evaluation and the services compiled code calls.

Compiled code (see `codegen/compiler.py`) is plain Python that calls into a
`Runtime`: operators' slow paths, native calls, property and index access,
function pointers, the operation counter, limits and output. One Runtime
serves one evaluation; the compiled code is shared between evaluations.
"""

from __future__ import annotations

import itertools
import sys
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from types import FrameType, TracebackType

from agentkernel.rhai.errors import NO_POS, ErrorKind, Pos, RhaiRuntimeError
from agentkernel.rhai.runtime import failures, ops, pacing
from agentkernel.rhai.runtime.context import NO_THIS
from agentkernel.rhai.runtime.copying import clone
from agentkernel.rhai.runtime.data_size import LIST_SLOT, LiveData, Walker
from agentkernel.rhai.runtime.internal_errors import log_internal_error
from agentkernel.rhai.runtime.printing import calls_to_format, calls_to_print, to_debug, to_string
from agentkernel.rhai.runtime.values import (
    TAGGED,
    TAGGED_CONTAINERS,
    Char,
    FnPtr,
    RangeVal,
    TaggedBool,
    TaggedDict,
    TaggedStr,
    has_tagged,
    plain,
    restore,
    type_name,
    with_tag,
)
from agentkernel.rhai.stdlib import INLINED_NAMES, Library, Mutated, default_library, inlines_standard
from agentkernel.rhai.syntax.records import mutable_record, record
from agentkernel.rhai.syntax.words import is_reserved, is_valid_function_name, reserved_message

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

_CONTAINERS = frozenset({list, dict, bytearray, *TAGGED_CONTAINERS})
_SIZED = frozenset({str, list, dict, bytearray, FnPtr, TaggedStr})
_LENGTHY = frozenset({str, list, dict, bytearray, TaggedStr})
_POLL_SIZE = pacing.POLL_SIZE
_poll = pacing.poll
_ONLY_THE_TEMPORARY = 3  # sys.getrefcount of a list the compiled code's temporary alone holds
_BUILT = _SIZED | {Mutated}  # what a native's result may hold that counts toward the data limit


class _CharCache(dict[str, Char]):
    """The `Char` of each character a `for` walks, made once: a Char is an immutable value
    (a tagged one is a TaggedChar, never shared), so one object serves every loop."""

    def __missing__(self, text: str) -> Char:
        char = Char(text)
        if len(self) < 4096:  # the characters scripts meet; any other is made anew
            self[text] = char
        return char


_CHARS = _CharCache()
_WINDOW_ROOM = 1 << 62  # operations: past this room, a window is this long (and no int meets inf)
CHAR_OF = _CHARS.__getitem__  # a string's character as a `char`: what `for c in s` walks (one each)
NOT_PURE: Any = object()  # `_pure_method` found no pure native to call


def _holds(container: Any, index: Any, value: Any) -> bool:
    """Whether `container[index]` is `value` itself (a list or a map; anything else: no)."""
    kind = type(container)
    if kind is dict:
        return container.get(index) is value
    if kind is list and type(index) is int and -len(container) <= index < len(container):
        return container[index] is value
    return False


def _big(value: Any) -> bool:
    """Whether a native walking `value` is worth a look at the clock first."""
    return type(value) in _LENGTHY and len(value) >= _POLL_SIZE


@mutable_record
class Limits:
    """The reference's safety limits (RHAI.md §14); 0 means unlimited."""

    max_operations: int = 0
    max_call_levels: int = 64
    max_expr_depth: int = 64
    max_fn_expr_depth: int = 32
    max_string_size: int = 0
    max_array_size: int = 0
    max_map_size: int = 0
    max_variables: int = 0
    max_functions: int = 0
    max_modules: int = 0  # `import` statements one evaluation may run
    # ours, not the reference's: bytes of data one evaluation may hold at once (data_size.py)
    max_data_size: int = 0


class Cell:
    """A variable shared with closures: captured by reference (RHAI.md §10)."""

    __slots__ = ("shared", "v")

    def __init__(self, value: Any) -> None:
        self.v = value
        self.shared = False


class ThisBox:
    """`this` for a method-style call: the callee may change it, the caller stores it back."""

    __slots__ = ("const", "v")

    def __init__(self, value: Any, const: bool = False) -> None:
        self.v = value
        self.const = const


class _Snapshot(list):  # type: ignore[type-arg]
    """A copy of an array for a `for` loop to walk; a weak reference tells when the loop is over."""

    __slots__ = ("__weakref__",)


_WALKER = Walker(
    {
        Cell: lambda cell: (cell.v,),
        ThisBox: lambda box: (box.v,),
        Mutated: lambda changed: (changed.receiver, changed.result),
    }
)
_LIVE = LiveData(_WALKER)
data_size_of = _WALKER.size_of
flat_size_of = _WALKER.flat_size


@record
class ScriptFn:
    """A compiled script function: its Rhai name, parameters and Python body.

    `this_type` is set for a typed method (`fn int.calc(x)`: "i64"), which
    only a method call on a value of that type reaches.
    """

    name: str
    arity: int
    body: Callable[..., Any]
    this_type: str | None = None
    private: bool = False
    params: tuple[str, ...] = ()


def copy_value(value: Any) -> Any:
    """A Rhai value copy for a second name: containers copy, the rest is immutable."""
    return clone(value) if type(value) in _CONTAINERS else value


class ExitScript(BaseException):
    """`exit(v)`: ends the whole evaluation with a value; no `catch` sees it.

    A BaseException, like SystemExit: a native's `except Exception` (which
    turns a Python failure into a Rhai error) must let it through.
    """

    def __init__(self, value: Any) -> None:
        self.value = value
        super().__init__("exit")


class Runtime:
    """One evaluation: limits, counters, output, global constants and functions."""

    # what compiled code reads or writes at every operation, function call or push, as
    # slots: CPython's shared-key instance dict gives up past 30 attributes (this class has
    # more), and a slot is read and written faster than a key of a dict of its own
    __slots__ = (
        "__dict__",
        "__weakref__",
        "checkpoint",
        "data_limit",
        "functions_named_push",
        "map_limit",
        "max_depth",
        "operations",
        "sizes_checked",
        "variable_limit",
    )

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        library: Library | None = None,
        functions: dict[tuple[str, int], ScriptFn] | None = None,
        methods: dict[tuple[str, int, str], ScriptFn] | None = None,
        stdout: Callable[[str], None] | None = None,
        source: str | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.library = library or default_library()
        self.pure_calls = self.library.pure_calls
        self.changing_calls = self.library.changing_calls
        self.functions: dict[tuple[str, int], ScriptFn] = functions or {}
        # typed methods by (name, arity, this type); empty (falsy) for most scripts, so a
        # method call costs them one test
        self.methods: dict[tuple[str, int, str], ScriptFn] = methods or {}
        # `x.push(v)` and `s.append(x)` take fast paths unless a script defines its own
        self.functions_named_push = self._defines_method("push")
        self.functions_named_append = self._defines_method("append")
        self._standard_inline = inlines_standard(self.library)
        self.natives_inline = self.natives_inlinable()
        self.global_consts: dict[str, Any] = {}
        self.operations = 0
        self.max_operations = self.limits.max_operations
        # compiled code counts inline and calls reached_checkpoint() past this
        self.checkpoint: float = self.max_operations or float("inf")
        # the highest count a native's callback reached (its operations are then forgotten)
        self.callback_peak = 0
        # the operations of the top level's later statements, counted ahead with its block
        # (codegen/statements.py): the reference has not counted them when a callback runs
        self.ahead = 0
        self.callbacks_running = 0  # a callback's own callbacks count from where it is
        self.limit_or_inf: float = self.max_operations or float("inf")
        self.string_limit = self.limits.max_string_size
        self.array_limit = self.limits.max_array_size
        self.map_limit = self.limits.max_map_size
        self.variable_limit = self.limits.max_variables
        self.max_depth = self.limits.max_call_levels
        self.source = source
        self._stdout = stdout or (lambda text: print(text))
        self._this_after: Any = None
        self.depth_hint = 0
        self.eval_scope: dict[str, Any] = {}
        self.eval_consts: frozenset[str] = frozenset()  # the caller's constants a running `eval` sees
        # the names a running `eval`'s text declared with `let` at its top level, and those of the
        # caller's variables the last `eval` declared anew (shadowed: a closure keeps the old one)
        self.eval_lets: set[str] = set()
        self.eval_declared: frozenset[str] = frozenset()
        self.eval_hook: Callable[[Runtime, str, dict[str, Any]], Any] | None = None
        # `import`: what finds and loads modules (modules.ModuleLoader; None = no module can be found),
        # the modules in sight by name (the top level's imports), and the running module's exports
        self.module_loader: Any = None
        self.imports: dict[str, Any] = {}
        self.exports: dict[str, Cell] = {}
        self.deadline: pacing.Deadline | None = None
        self.data_limit = self.limits.max_data_size
        self.data_meter = 0  # bytes that may be live: the last measure, plus what was built since
        self.data_trigger = self.data_limit
        self.entry_frame: FrameType | None = None
        # the arrays `for` loops are walking, each gone when its loop is over (made when first needed)
        self.iterating: weakref.WeakValueDictionary[int, _Snapshot] | None = None
        # compiled code checks and counts what it builds only when some size limit is set
        self.sizes_checked = bool(self.string_limit or self.array_limit or self.map_limit or self.data_limit)

    def natives_inlinable(self) -> bool:
        """Whether compiled code may run the natives it inlines (`s.trim()`, `s.contains(x)`,
        `.len`: stdlib `INLINED`) as the standard library's: no typed method, no script function
        of one's name and arity, no host registration of them. Whoever changes `functions` sets
        `natives_inline` anew with this."""
        return self._standard_inline and not self.methods and self.functions.keys().isdisjoint(INLINED_NAMES)

    def _defines_method(self, name: str) -> bool:
        """Whether the script defines a method `name(x)`, typed or not."""
        return (name, 1) in self.functions or any(key[:2] == (name, 1) for key in self.methods)

    def run(self, body: Callable[..., Any], *args: Any) -> Any:
        """Call compiled code (`main`, a function's body) as this evaluation.

        For its length, this runtime's deadline is the one that long work polls
        (pacing.py), and this frame is the bottom of the stack whose locals the
        data limit counts.
        """
        self.entry_frame = sys._getframe()
        token = pacing.install(self.deadline)
        try:
            return body(self, *args)
        except ExitScript:
            # `exit` in a function: the top level's statements after the one that called it,
            # counted ahead, never ran there (one `exit` of its own took them back already)
            self.operations -= self.ahead
            self.ahead = 0
            raise
        finally:
            pacing.uninstall(token)
            self.entry_frame = None

    # -- counting and limits ---------------------------------------------------------------

    def count(self, n: int) -> None:
        """Add `n` operations; past `max_operations` the script stops (uncatchable)."""
        self.operations += n
        if self.operations > self.checkpoint:
            self.reached_checkpoint()

    def reached_checkpoint(self) -> None:
        """The operation count passed `checkpoint`: the limit, or a subclass's periodic check."""
        if self.max_operations and self.operations > self.max_operations:
            raise failures.too_many_operations()

    def settle(self, pending: int) -> float:
        """A loop counting in a local (codegen/control.py `counted_locally`) passed the room it had:
        add its `pending` operations and check them; returns the room left now."""
        self.operations += pending
        if self.operations > self.checkpoint:
            self.reached_checkpoint()
        return self.checkpoint - self.operations

    def window(self, start: int, per: int) -> tuple[float, int]:
        """A `for` over a range counted by its variable (codegen/windows.py): of the room left
        to the checkpoint, the iterations of `per` operations from `start` that fit in seven
        eighths of it; returns the room they leave (for what the body counts on its own) and
        the first value past them."""
        room = self.checkpoint - self.operations
        fit = (room - room // 8) // per if room < _WINDOW_ROOM else _WINDOW_ROOM // per
        return room - fit * per, start + int(fit)

    def settle_window(self, pending: int, start: int, per: int) -> tuple[float, int]:
        """`settle` for a loop counted by its variable: add `pending` and check it, then the
        next window from `start` (`window`)."""
        self.operations += pending
        if self.operations > self.checkpoint:
            self.reached_checkpoint()
        return self.window(start, per)

    def counted(self) -> int:
        """The evaluation's operation count as the reference reports it last: what a native's
        callbacks counted when they were the last to count (`call_back`, `count_apart`), else
        the count. It is the smallest `max_operations` that lets the script finish unless a
        callback counted more than the statements after it."""
        return max(self.operations, self.callback_peak)

    def forget_since(self, before: int, start: int) -> None:
        """A native's callback, which counted from `start`, is over: its operations are
        forgotten (the count is `before` again), as the reference's `NativeCallContext`
        counts them on a copy of its state, while the limit held them. A checkpoint short of
        the limit (a subclass's periodic one, e.g. a look at the clock) still comes nearer by
        the work they were."""
        ops = self.operations
        if ops > self.callback_peak and not self.ahead:
            self.callback_peak = ops
        self.operations = before
        if self.checkpoint < self.limit_or_inf:
            self.checkpoint -= ops - start

    def count_apart(self, operations: int) -> None:
        """`operations` the reference counts on a copy of its state, as a native calls another
        (`print` of an array calls `to_debug` for each item, nesting): they reach the limit and
        the count's peak (`counted`), and the count goes on from where it was."""
        if operations:
            ops = self.operations + operations - (0 if self.callbacks_running else self.ahead)
            if self.max_operations and ops > self.max_operations:
                raise failures.too_many_operations()
            if ops > self.callback_peak and not self.ahead:
                self.callback_peak = ops

    def count_to_string(self, value: Any) -> None:
        """The reference's `to_string` of a value that is no string (an interpolation's part),
        a native's call on a copy of its state, and the calls it makes (an array's items')."""
        self.count_apart(1 + calls_to_format(value))

    def count_evaluation(self, operations: int) -> None:
        """An evaluation of its own the reference makes, counting from 0 (its `parse_json`
        evaluates the text as a script): it reaches the limit by itself, and is the count's
        peak when it is the last the reference reports (no statements counted ahead)."""
        if self.max_operations and operations > self.max_operations:
            raise failures.too_many_operations()
        if operations > self.callback_peak and not self.ahead:
            self.callback_peak = operations

    def enter(self, depth: int) -> None:
        """A script function is being entered at nesting `depth` (1 = called from the top)."""
        if depth > self.max_depth:
            raise failures.stack_overflow()

    def check_string_size(self, value: str) -> None:
        limit = self.limits.max_string_size
        if limit and len(value) > limit:
            raise failures.too_large(failures.STRING_TOO_LARGE, keyed=False)

    def check_array_size(self, value: list[Any] | bytearray) -> None:
        limit = self.limits.max_array_size
        if limit and len(value) > limit:
            raise failures.too_large(failures.ARRAY_TOO_LARGE, keyed=False)

    def check_map_size(self, value: dict[str, Any]) -> None:
        limit = self.limits.max_map_size
        if limit and len(value) > limit:
            raise failures.too_large(failures.MAP_TOO_LARGE, keyed=False)

    def check_size(self, value: Any) -> Any:
        """Check any value that may have grown; returns it for chaining."""
        kind = type(value)
        if kind is str:
            self.check_string_size(value)
        elif kind is list or kind is bytearray:
            self.check_array_size(value)
        elif kind is dict:
            self.check_map_size(value)
        return value

    # -- the data limit: bytes held by the whole evaluation (data_size.py) ---------------------

    def charge_data(self, size: int) -> None:
        """`size` bytes were just built or stored; past the trigger, measure what is live."""
        self.data_meter += size
        if self.data_meter > self.data_trigger:
            self.measure_data()

    def reserve_data(self, size: int, what: str) -> None:
        """`size` bytes of `what` (failures.STRING_TOO_LARGE…) are about to be built: refuse
        them now if they would not fit, rather than after building them."""
        if self.data_limit:
            self.data_meter += size
            if self.data_meter > self.data_trigger:
                self.measure_data(size, what)

    def charge(self, size: int) -> None:
        """`size` bytes were just built by a native that counts them itself (registered `charged`)."""
        if self.data_limit:
            self.charge_data(size)

    def account(self, value: Any) -> Any:
        """Count a value just built or stored toward the data limit; returns it."""
        if self.data_limit and type(value) in _SIZED:
            self.charge_data(data_size_of(value))
        return value

    @staticmethod
    def data_size(value: Any) -> int:
        return data_size_of(value)

    @staticmethod
    def flat_size(items: list[Any], kinds: set[type]) -> int | None:
        return flat_size_of(items, kinds)

    def measure_data(self, pending: int = 0, what: str = failures.ARRAY_TOO_LARGE) -> None:
        """Count what the evaluation holds now (plus `pending` bytes about to be built);
        over the limit, stop it with the reference's `ErrorDataTooLarge`.

        The next measure comes once as much again has been built as is left below
        the limit, but at least an eighth of the limit later, so that measuring
        costs little even close to the limit (which may then be passed by an eighth).
        """
        if self.entry_frame is None:
            return
        snapshots = list(self.iterating.values()) if self.iterating is not None else []
        held = self.module_loader.held() if self.module_loader is not None else ()
        extra = (*self.global_consts.values(), *self.eval_scope.values(), *itertools.chain(*snapshots), *held)
        tally = _LIVE.measure(self.entry_frame, extra)
        if tally is None:
            return
        live = tally.total + pending + LIST_SLOT * sum(map(len, snapshots))
        if live > self.data_limit:
            message = what if pending > tally.total else tally.largest()
            raise failures.data_limit(message, self.data_limit)
        self.data_meter = live
        self.data_trigger = max(self.data_limit, live + self.data_limit // 8)

    # -- what compiled code calls where values are built, copied and stored ------------------------

    def copy(self, value: Any) -> Any:
        """A container's copy for a second name (arrays, maps and BLOBs are values)."""
        copied = clone(value)
        if self.data_limit:
            self.charge_data(data_size_of(copied))
        return copied

    def pushed(self, array: list[Any]) -> None:
        """`array.push(x)` just appended `x` (compiled inline): check and count it."""
        if self.array_limit:
            self.check_array_size(array)
        if self.data_limit:
            item = array[-1]
            self.data_meter += data_size_of(item) + 8 if type(item) in _SIZED else 24
            if self.data_meter > self.data_trigger:
                self.measure_data()

    def built(self, value: Any) -> Any:
        """A string, array, map or BLOB an operator just built (`a + b`): check and count it."""
        self.check_size(value)
        if self.data_limit and type(value) in _SIZED:
            self.charge_data(data_size_of(value))
        return value

    def compound(self, op: str, current: Any, right: Any) -> Any:
        """`x op= y` on anything but two ints; `+=` on an array, map or BLOB grows it in place."""
        kind = type(current)
        if op[0] == "+" and kind is str and self.string_limit:
            added = len(right) if type(right) is str else 0
            if len(current) + added > self.string_limit:
                raise failures.too_large(failures.STRING_TOO_LARGE)
        pacing.poll_size(max(pacing.work_size(current), pacing.work_size(right)))
        result = self.check_size(ops.compound(op, current, right))
        if self.data_limit:
            grown = result is current and kind in _CONTAINERS
            self.account(right if grown else result)
        return result

    def interpolate(self, parts: tuple[str, ...]) -> str:
        """`` `a${x}b` ``, its parts already text: their total is checked before joining."""
        if self.sizes_checked:
            total = sum(map(len, parts))
            if self.string_limit and total > self.string_limit:
                raise failures.too_large(failures.STRING_TOO_LARGE)
            if total > pacing.CHUNK:
                pacing.poll_size(total // pacing.STRING_WORK)
            if self.data_limit:
                self.data_meter += total + 49
                if self.data_meter > self.data_trigger:
                    self.measure_data(total + 49, failures.STRING_TOO_LARGE)
        return "".join(parts)

    # -- output ------------------------------------------------------------------------------

    def write_stdout(self, text: str) -> None:
        self._stdout(text)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def print_value(self, value: Any) -> None:
        self.count_apart(calls_to_print(value, False))
        self._stdout(to_string(value))

    def debug_value(self, value: Any, pos: Pos) -> None:
        self.count_apart(calls_to_print(value, True))
        self.debug_text(to_debug(value), pos)

    def debug_text(self, text: str, pos: Pos) -> None:
        prefix = f"{self.source} @ " if self.source else ""
        self._stdout(f"{prefix}{pos[0]}:{pos[1]} | {text}")

    # -- operators and conditions --------------------------------------------------------------

    @staticmethod
    def condition(value: Any) -> bool:
        """Rhai has no truthiness: only bools decide (RHAI.md §7)."""
        if value is True:
            return True
        if value is False:
            return False
        if type(value) is TaggedBool:
            return value.value
        raise failures.mismatch("bool", type_name(value))

    # -- natives ---------------------------------------------------------------------------------

    def call_native(self, name: str, args: list[Any]) -> Any:
        result = self.call_native_ref(name, args, False)
        return result.result if type(result) is Mutated else result

    def call_native_ref(self, name: str, args: list[Any], const: bool) -> Any:
        """A native call whose first argument is a variable (passed by reference).

        Returns the result, or Mutated(new_first_argument, result) for the
        compiled code to store back. With big arguments it looks at the clock
        first (pacing.py); what it built counts toward the data limit.
        """
        native = self.library.resolve(name, args)
        if native is not None and not native.needs_context and 1 <= len(args) <= 3:
            if native.pure:
                self._remember_pure(name, args, native.impl)
            elif not const and type(args[0]) is str:  # a string changes only by a new one
                self.library.changing_calls[(name, *(type(a) for a in args))] = native.impl
        if native is None:
            if has_tagged(args):  # natives take a tagged value as its plain value
                return self._call_untagged(name, args, const)
            return self.library.call(self, name, args)  # raises Function not found
        if const and not native.pure:
            raise failures.non_pure_on_constant(name)
        if args and (_big(args[0]) or (len(args) > 1 and _big(args[1]))):
            _poll()  # a big receiver or first argument: a look at the clock first
        result = self.library.invoke(self, native, args)
        if self.data_limit and type(result) in _BUILT and not native.charged:
            self._account_native(result)
        return result

    def _remember_pure(self, name: str, args: list[Any], impl: Callable[..., Any]) -> None:
        """A pure native of one argument after the receiver, found for these types, is found
        again by `pure_method` (never for a map, nor a range, whose two kinds share one type)."""
        kinds = tuple(type(a) for a in args)
        if kinds[0] is not dict and RangeVal not in kinds:  # a map's property may be a pointer
            self.pure_calls[(name, *kinds)] = impl

    def changing_method(self, name: str, receiver: Any, *args: Any) -> Any:
        """`receiver.name(args)` on a variable that is not a constant, by a native seen before
        to change a string receiver for these types (`call_native_ref`): its Mutated at once,
        under the rules of `pure_method`; NOT_PURE when the full path must decide."""
        key = (name, type(receiver), *map(type, args)) if args else (name, type(receiver))
        impl = self.changing_calls.get(key)
        if impl is None or self.methods or (name, len(args)) in self.functions:
            return NOT_PURE
        if len(receiver) >= _POLL_SIZE or (args and (_big(args[0]) or (len(args) > 1 and _big(args[1])))):
            _poll()
        try:
            return impl(receiver, *args)
        except RhaiRuntimeError:
            raise
        except Exception:
            return NOT_PURE

    def pure_method0(self, name: str, receiver: Any) -> Any:
        """`receiver.name()` as `pure_method` runs `receiver.name(arg)`."""
        kind = type(receiver)
        impl = self.pure_calls.get((name, kind))
        if impl is None or self.methods or (name, 0) in self.functions:
            return NOT_PURE
        if kind in _LENGTHY and len(receiver) >= _POLL_SIZE:
            _poll()
        try:
            result = impl(receiver)
        except RhaiRuntimeError:
            raise
        except Exception:
            return NOT_PURE
        if self.data_limit and type(result) in _BUILT:
            self._account_native(result)
        return result

    def pure_method2(self, name: str, receiver: Any, first: Any, second: Any) -> Any:
        """`receiver.name(first, second)` as `pure_method` runs `receiver.name(arg)`."""
        kind = type(receiver)
        impl = self.pure_calls.get((name, kind, type(first), type(second)))
        if impl is None or self.methods or (name, 2) in self.functions:
            return NOT_PURE
        if (kind in _LENGTHY and len(receiver) >= _POLL_SIZE) or (
            type(first) in _LENGTHY and len(first) >= _POLL_SIZE
        ):
            _poll()
        try:
            result = impl(receiver, first, second)
        except RhaiRuntimeError:
            raise
        except Exception:
            return NOT_PURE
        if self.data_limit and type(result) in _BUILT:
            self._account_native(result)
        return result

    def pure_method(self, name: str, receiver: Any, arg: Any) -> Any:
        """`receiver.name(arg)` by a pure native seen before for these types (`_remember_pure`),
        with what `call_native_ref` does around it: a look at the clock for a big argument,
        the data limit. `NOT_PURE` when there is none, or when the full path must decide: a
        map (its property may be a pointer to call), a script function of the name or typed
        methods, a native that failed (the full path words the failure)."""
        kind = type(receiver)
        impl = self.pure_calls.get((name, kind, type(arg)))
        if impl is None or self.methods or (name, 1) in self.functions:
            return NOT_PURE
        if (kind in _LENGTHY and len(receiver) >= _POLL_SIZE) or (
            type(arg) in _LENGTHY and len(arg) >= _POLL_SIZE
        ):
            _poll()
        try:
            result = impl(receiver, arg)
        except RhaiRuntimeError:
            raise
        except Exception:
            return NOT_PURE
        if self.data_limit and type(result) in _BUILT:
            self._account_native(result)
        return result

    def _call_untagged(self, name: str, args: list[Any], const: bool) -> Any:
        """A native called with the plain values of tagged arguments; a receiver it changes
        in place (`s.pad(5, "-")`, `a.push(1)`) keeps its tag, as the reference's does."""
        plains = [plain(a) for a in args]
        result = self.call_native_ref(name, plains, const)
        if type(result) is Mutated and type(args[0]) in TAGGED:
            return Mutated(with_tag(result.receiver, args[0].tag), result.result)
        if type(args[0]) in TAGGED_CONTAINERS:
            restore(args[0], plains[0])  # a tagged array or map changed in place
        return result

    def _account_native(self, result: Any) -> None:
        kind = type(result)
        if kind is Mutated:
            if type(result.receiver) is str:
                self.account(result.receiver)
            self.account(result.result)
        elif kind in _SIZED:
            self.charge_data(data_size_of(result))

    # -- properties and indexing --------------------------------------------------------------------

    def get_prop(self, obj: Any, name: str) -> Any:
        if type(obj) is dict or type(obj) is TaggedDict:  # a map's `tag` is its key
            return obj.get(name)
        try:
            return self.library.get_property(self, obj, name)
        except RhaiRuntimeError as error:
            if type(obj) in TAGGED:
                return self.get_prop(plain(obj), name)
            self._tried_indexer(error)
            raise

    def set_prop(self, obj: Any, name: str, value: Any) -> Any:
        """Set `obj.name = value`; returns the object to store back (maps change in place)."""
        if type(obj) is dict or type(obj) is TaggedDict:
            if obj.get(name) is value:
                return obj  # stored back after growing in place (`o.a += x`): counted as it grew
            obj[name] = value
            self.check_map_size(obj)
            self.account(value)
            return obj
        try:
            return self.library.set_property(self, obj, name, value)
        except RhaiRuntimeError as error:
            if type(obj) in TAGGED or type(value) in TAGGED:
                return restore(obj, self.set_prop(plain(obj), name, plain(value)))
            self._tried_indexer(error)
            raise

    def _tried_indexer(self, error: RhaiRuntimeError) -> None:
        """A property no getter or setter serves: the reference then tries an indexer with its
        name (chaining.rs `call_indexer_get`/`_set`), one more native's call, which fails too."""
        if error.kind == ErrorKind.DOT_EXPR:
            self.count(1)

    def index_get(self, obj: Any, index: Any) -> Any:
        try:
            return self.library.index_get(self, obj, index)
        except RhaiRuntimeError:
            if type(obj) in TAGGED or type(index) in TAGGED:
                return self.index_get(plain(obj), plain(index))
            raise

    def index_set(self, obj: Any, index: Any, value: Any, where: tuple[Pos, Pos] | None = None) -> Any:
        """Set `obj[index] = value`; returns the container to store back.

        `where` is the `[` and the `=` of the assignment: the reference reports a
        value that has no indexer at the `[`, a value of the wrong type for a
        character, bit or byte at the `=`, and anything about the index at the index
        (the position of the compiled line).
        """
        if self.data_limit and _holds(obj, index, value):
            return obj  # stored back after growing in place (`a[i] += x`): counted as it grew
        try:
            result = self.library.index_set(self, obj, index, value)
        except RhaiRuntimeError as exc:
            if type(obj) in TAGGED or type(index) in TAGGED:  # the value keeps its tag if it can
                return restore(obj, self.index_set(plain(obj), plain(index), value, where))
            if type(value) in TAGGED:
                return self.index_set(obj, index, plain(value), where)
            if where is not None and exc.pos is None:
                if exc.kind is ErrorKind.INDEXING_TYPE:
                    exc.pos = where[0]
                elif isinstance(exc, failures.AssignedMismatch):
                    exc.pos = where[1]
            raise
        if self.data_limit:
            self.account(result if type(result) is str else value)
        return result

    def account_slot(self, container: Any, index: Any, value: Any) -> None:
        """Count `value`, about to be stored at `container[index]`, unless it is there already."""
        if not _holds(container, index, value):
            self.account(value)

    @staticmethod
    def append_text(value: Any) -> str:
        """What `s += value` and `s.append(value)` add to a string: a BLOB as UTF-8 text."""
        return ops.utf8_lossy(value) if type(value) is bytearray else to_string(value)

    # -- iteration ---------------------------------------------------------------------------------------

    def iterate(self, value: Any) -> Iterable[Any]:
        """What `for x in value` walks over (RHAI.md §8); arrays are copied first."""
        kind = type(value)
        if kind is RangeVal:
            span: range = value.as_range()
            return span
        if kind is list or kind is bytearray:
            if self.data_limit and len(value) >= pacing.POLL_SIZE:
                return self._snapshot(value)
            return list(value)
        if kind is str:
            return map(CHAR_OF, value)  # a string never changes under the loop
        iterator: Iterable[Any] | None = self.library.iterate(value)
        if iterator is None:
            if kind in TAGGED:
                return self.iterate(plain(value))
            raise failures.not_iterable()
        return iterator

    def iterate_new(self, value: Any) -> Iterable[Any]:
        """`for x in f(…)`: a list that nothing but the compiled code's temporary holds (a
        native's new result) is walked as it is; no copy, since nothing can change it under
        the loop. Anything else as `iterate`. (The references: the temporary, `value`, and
        `getrefcount`'s own argument.)"""
        if type(value) is list and sys.getrefcount(value) <= _ONLY_THE_TEMPORARY:
            return value
        return self.iterate(value)

    def _snapshot(self, value: list[Any] | bytearray) -> _Snapshot:
        """The copy a `for` walks, kept where the data limit sees it while the loop runs
        (a loop over `this` in a recursion makes one per level, and nothing else holds them)."""
        snapshot = _Snapshot(value)
        if self.iterating is None:
            self.iterating = weakref.WeakValueDictionary()
        self.iterating[id(snapshot)] = snapshot
        self.charge_data(LIST_SLOT * len(snapshot))
        return snapshot

    # -- functions and pointers -------------------------------------------------------------------------

    def make_fn_ptr(self, name: Any) -> FnPtr:
        """`Fn("name")`: a pointer resolved at call time (RHAI.md §10)."""
        if type(name) is not str:
            raise failures.mismatch("string", type_name(name))
        if not is_valid_function_name(name):
            if is_reserved(name):  # the reference's parse error, raised where `Fn` is called
                raise failures.parsing(f"Syntax error: {reserved_message(name)}", None)
            raise failures.not_found_text(name)
        return FnPtr(name)

    def fn_ptr_accepts(self, fn: FnPtr, arg_count: int) -> bool:
        total = len(fn.curried) + arg_count
        if fn.target is not None:
            return getattr(fn.target, "rhai_arity", total) == total
        if (fn.name, total) in self.functions:
            return True
        return self.library.has_function(fn.name, total)

    def last_this(self) -> Any:
        return self._this_after

    def reading_callback(self, fn: FnPtr) -> Callable[[Sequence[Any], set[type]], list[Any]] | None:
        """A closure of one parameter that only reads it (analysis/facts.py: `reads_only`), bound
        to this evaluation: `filter` and `map` call it with each item itself, not a copy. What
        it returns calls it with each item in turn and gives the results, each call counted
        as `call_back` counts it (inlined: a loop here costs less than a call per item, and
        a list less than a generator's switch per item); it is given the items' types too
        (one type: the closure's copy over many items may run them, codegen/batches.py)."""
        target = fn.target
        if target is None or fn.curried or not getattr(target, "rhai_reads_only", False):
            return None
        depth = self.depth_hint + 1
        copies = getattr(target, "rhai_batch", None)

        def each(items: Sequence[Any], kinds: set[type]) -> list[Any]:
            if copies is not None and len(kinds) == 1 and self.natives_inline:
                copy = copies.get(next(iter(kinds)))
                batched = self._run_batch(copy, items, depth) if copy is not None else None
                if batched is not None:
                    return batched
            before = self.operations
            start = before + 1 if self.callbacks_running else before - self.ahead + 1
            peak, limit = self.callback_peak, self.limit_or_inf
            values: list[Any] = []
            keep = values.append
            try:
                for item in items:
                    self.operations = start
                    if start > self.checkpoint:
                        self.reached_checkpoint()
                    keep(target(self, depth, None, item))
                    ops = self.operations
                    if ops > peak:
                        peak = ops
                    if self.checkpoint < limit:
                        self.checkpoint -= ops - start + 1
            finally:
                self.operations = before
                if peak > self.callback_peak and not self.ahead:
                    self.callback_peak = peak
            return values

        return each

    def _run_batch(
        self, copy: tuple[Callable[..., list[Any]], int], items: Sequence[Any], depth: int
    ) -> list[Any] | None:
        """A reading closure's copy run over all `items` at once (codegen/batches.py), counted as
        `reading_callback`'s calls one by one count them: None (nothing run, or nothing changed)
        when one of them would stop at the checkpoint, or the copy fails or counted."""
        run, per = copy
        before, checkpoint, count = self.operations, self.checkpoint, len(items)
        start = before + 1 if self.callbacks_running else before - self.ahead + 1
        shrinking = checkpoint < self.limit_or_inf  # each call brings a checkpoint short of it nearer
        if start + per > (checkpoint - (count - 1) * (per + 1) if shrinking else checkpoint):
            return None
        try:
            values = run(self, depth, None, items)
        except Exception:  # the calls one by one fail where the reference does
            values = None
        if values is None or self.operations != before:
            self.operations = before
            return None
        if shrinking:
            self.checkpoint = checkpoint - count * (per + 1)
        if start + per > self.callback_peak and not self.ahead:
            self.callback_peak = start + per
        return values

    def call_back(self, fn: FnPtr, args: Sequence[Any], this: Any = NO_THIS) -> Any:
        """A native's call of a callback (`map`, `sort`, `drain`…): as `call_fn_ptr`, counted
        as in the reference, 1 for the call, and what it counted forgotten after it
        (`forget_since`): a callback is bounded by the limit, from the count at the call."""
        before = self.operations
        # the count where the reference is: it has not counted the statements after this one
        start = self.operations = before if self.callbacks_running else before - self.ahead
        self.callbacks_running += 1
        self.count(1)
        try:
            return self.call_fn_ptr(fn, args, this)
        finally:
            self.callbacks_running -= 1
            self.forget_since(before, start)

    def call_fn_ptr(
        self, fn: FnPtr | str, args: Sequence[Any], this: Any = NO_THIS, depth: int | None = None
    ) -> Any:
        """Call a pointer: a closure, a script function or a native, by name and arity."""
        if depth is None:
            depth = self.depth_hint + 1
        if type(fn) is str:
            fn = FnPtr(fn)
        assert isinstance(fn, FnPtr)
        full = [*fn.curried, *args]
        box = ThisBox(this) if this is not NO_THIS else None
        if fn.target is not None:
            arity = getattr(fn.target, "rhai_arity", len(full))
            if arity != len(full):  # called by name and arity: its captured variables come first
                captured = [cell.v for cell in getattr(fn.target, "args", ())]
                raise self.not_found(fn.name, [*captured, *full])
            result = fn.target(self, depth, box, *full)
        else:
            script = self.script_for(fn.name, len(full), box)
            if script is not None:
                result = script.body(self, depth, box, *full)
            elif box is not None:
                receiver_args = [box.v, *full]
                result = self.call_native(fn.name, receiver_args)
            else:
                result = self.call_native(fn.name, full)
        if box is not None:
            self._this_after = box.v
        return result

    def script_for(self, name: str, arity: int, box: ThisBox | None) -> ScriptFn | None:
        """The script function a call by name reaches: with a `this` (a method call), the
        typed method for its type first, then the catch-all; without, the catch-all only."""
        if box is not None and self.methods:
            typed = self.methods.get((name, arity, type_name(box.v)))
            if typed is not None:
                return typed
        return self.functions.get((name, arity))

    def not_found(self, name: str, args: Sequence[Any]) -> RhaiRuntimeError:
        return failures.function_not_found(name, args)

    def this_value(self, box: ThisBox | None) -> Any:
        if box is None:
            raise failures.unbound_this()
        return box.v

    def method(self, name: str, receiver: Any, args: list[Any], const: bool, depth: int) -> Any:
        """`receiver.name(args)`: a map's Fn property, a script method, else a native.

        Returns the result, or Mutated(new_receiver, result) when the receiver
        changed and must be stored back.
        """
        if type(receiver) is dict:
            member = receiver.get(name)
            if type(member) is FnPtr:
                box = ThisBox(receiver, const)
                result = self.call_fn_ptr(member, args, receiver, depth)
                return Mutated(self._this_after, result) if self._this_after is not receiver else result
        if self.methods:
            script = self.methods.get((name, len(args), type_name(receiver))) or self.functions.get(
                (name, len(args))
            )
        else:
            script = self.functions.get((name, len(args)))
        if script is not None:
            box = ThisBox(receiver, const)
            result = script.body(self, depth, box, *args)
            return Mutated(box.v, result) if box.v is not receiver else result
        return self.call_native_ref(name, [receiver, *args], const)

    # -- exceptions ------------------------------------------------------------------------------------------

    @staticmethod
    def throw(value: Any) -> RhaiRuntimeError:
        return failures.thrown(value, to_string(value))

    @staticmethod
    def catch_value(exc: RhaiRuntimeError) -> Any:
        """What `catch (e)` binds: the thrown value, or a map describing the error. A value
        thrown inside a function is the value too: the reference looks through its call
        levels first (`unwrap_inner`)."""
        thrown = exc
        while thrown.kind in _LEVELS and thrown.inner is not None:
            thrown = thrown.inner
        if thrown.kind == ErrorKind.RUNTIME and thrown.message.startswith("Runtime error"):
            return thrown.value
        value: dict[str, Any] = {"error": str(exc.kind)}  # the plain name, not the enum
        if exc.kind == ErrorKind.IN_FUNCTION_CALL or (exc.kind == ErrorKind.IN_MODULE and exc.inner):
            inner = exc.inner
            value["message"] = (
                f"{inner.display(exc.extras.get('source', ''))}\n{exc.message}" if inner else exc.message
            )
            if exc.kind == ErrorKind.IN_FUNCTION_CALL:
                value["source"] = ""
        else:
            value["message"] = exc.message
        if exc.pos is not None and exc.pos != NO_POS:
            value["line"], value["position"] = exc.pos
        value.update(exc.extras)
        return value

    def eval_text(self, text: Any, scope: dict[str, Any], consts: frozenset[str] = frozenset()) -> Any:
        """`eval(text)` in `scope` (the caller's variables, `consts` among them read-only);
        what the text assigns is written back into `scope`."""
        if type(text) is not str:
            raise self.not_found("eval", [text])
        if self.eval_hook is None:
            raise failures.host_failure("eval is not available")
        saved, self.eval_consts = self.eval_consts, consts
        try:
            return self.eval_hook(self, text, scope)
        finally:
            self.eval_consts = saved


def locate(
    exc: Exception,
    tb: TracebackType | None,
    lines: dict[int, Pos],
    operator_lines: set[int] | None = None,
) -> RhaiRuntimeError:
    """Give a Rhai error raised on a compiled line the position of that line's node.

    Arithmetic errors keep no position (RHAI.md §5); stack overflow takes the
    outermost call's position; everything else keeps the innermost one. A
    Python exception escaping a native becomes a Rhai error here, so nothing
    of Python leaks out of a script. Compiled code catches `Exception` only:
    `exit()` (ExitScript), Ctrl-C and SystemExit pass through untouched.
    """
    if not isinstance(exc, RhaiRuntimeError):
        exc = _from_python(exc)
    if tb is None:
        return exc
    line = tb.tb_lineno
    pos = lines.get(line)
    if pos is None:
        return exc
    if exc.kind == ErrorKind.STACK_OVERFLOW:
        exc.pos = pos
    elif exc.pos is None:
        if exc.kind == ErrorKind.ARITHMETIC and operator_lines is not None and line in operator_lines:
            return exc
        exc.pos = pos
        inner = exc.inner
        while inner is not None and inner.pos is None and inner.kind != ErrorKind.ARITHMETIC:
            inner.pos = pos  # a native's own wrapper: both levels point at its call
            inner = inner.inner
    return exc


def _from_python(exc: Exception) -> RhaiRuntimeError:
    if isinstance(exc, RecursionError):
        return failures.stack_overflow()
    if isinstance(exc, MemoryError):
        return failures.too_large(failures.STRING_TOO_LARGE, keyed=False)
    log_internal_error("Rhai evaluation failed inside the interpreter", exc)
    return failures.runtime("internal error")


#: the errors that wrap another one level up: a function's or a module's
_LEVELS = frozenset({ErrorKind.IN_FUNCTION_CALL, ErrorKind.IN_MODULE})
_UNWRAPPED = frozenset(
    {ErrorKind.STACK_OVERFLOW, ErrorKind.TOO_MANY_OPERATIONS, ErrorKind.DATA_TOO_LARGE, ErrorKind.TERMINATED}
)


def wrap_call(exc: Exception, label: str) -> Exception:
    """A script function's error as its caller sees it: `…\\nin call to function 'f'`."""
    if not isinstance(exc, RhaiRuntimeError) or exc.kind in _UNWRAPPED:
        return exc
    return failures.call_level(label, exc)


__all__ = [
    "CHAR_OF",
    "Cell",
    "ExitScript",
    "Limits",
    "Runtime",
    "ScriptFn",
    "ThisBox",
    "copy_value",
    "locate",
    "ops",
    "wrap_call",
]

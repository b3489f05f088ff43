"""The helper table: name → Python function(call, *args), written once for both engines.

A helper sees only plain Python values and the `ScriptCall` (who runs the
script, its budget, its log; DESIGN rules 1–3); an engine sees the table only
through the host's binding (scripting/contract.py `HelperBinding`), so adding
a helper never touches an engine. A helper registered with `Traced` shows in
a trace as a child span of the tool's or hook's (S26.1): `invoke` makes it,
from attributes its module gives, and only when telemetry records.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from agentkernel.config import CallBudget, KernelLimits
from agentkernel.errors import HelperError
from agentkernel.identity import Caller
from agentkernel.schemas.cost import SchemaBounds
from agentkernel.telemetry.helper_spans import Attributes, HelperSpan, helper_span
from agentkernel.types import JSONValue
from agentkernel.util.lazy_log import DEBUG, ERROR, INFO, WARNING, LazyLogger
from agentkernel.util.valid_unicode import has_lone_surrogate, repair_text

log = LazyLogger("agentkernel.helpers")
script_log = LazyLogger("agentkernel.script")

_LOG_LEVELS = {
    "debug": DEBUG,
    "info": INFO,
    "warning": WARNING,
    "error": ERROR,
}


class ScriptCall:
    """One run of one script function: who it runs for, what it is, what it may spend.

    `budget` is the call's `CallBudget`, made once by whoever starts the call
    (the dispatcher, the hook runner); None for a helper invoked outside any
    script call, which then has no deadline. `schema_bounds` is what an
    output schema the script gives (`llm_json`, `run_subagent`) may cost:
    the kernel's `limits.max_schema_*`.

    `log_line` is how `console.log`/`print` reach the kernel log. A script
    cannot flood it: one call keeps at most `max_log_lines` lines and
    `max_log_chars` characters, a line longer than `max_log_line_chars` is
    cut (saying how much was cut), and when either budget is spent one
    notice says so and the rest is dropped.
    """

    def __init__(
        self,
        caller: Caller,
        script: str,
        *,
        budget: CallBudget | None = None,
        max_log_lines: int = 200,
        max_log_line_chars: int = 10_000,
        max_log_chars: int = 200_000,
        schema_bounds: SchemaBounds | None = None,
    ) -> None:
        self.caller = caller
        self.schema_bounds = schema_bounds or SchemaBounds()
        self.script = script
        self.budget = budget
        self.max_log_lines = max_log_lines
        self.max_log_line_chars = max_log_line_chars
        self.max_log_chars = max_log_chars
        self.log_lines = 0
        self.log_chars = 0
        self._log_silenced = False
        self._secrets: tuple[str, ...] | None = None

    @classmethod
    def limited(cls, caller: Caller, script: str, limits: KernelLimits, budget: CallBudget) -> ScriptCall:
        """A call spending `budget`, whose log is bounded by the kernel's `limits:`."""
        return cls(
            caller,
            script,
            budget=budget,
            max_log_lines=limits.max_log_lines,
            max_log_line_chars=limits.max_log_line_chars,
            max_log_chars=limits.max_log_chars,
            schema_bounds=limits.schema_bounds,
        )

    def remaining_secs(self) -> float | None:
        """Seconds left before the call's wall-clock bound, for helpers' own timeouts."""
        return None if self.budget is None else self.budget.remaining_secs()

    def secrets(self) -> tuple[str, ...]:
        """The environment's values, which no span of this call may carry (read once, when a span first
        needs them: a call that records no span never reads them)."""
        if self._secrets is None:
            self._secrets = self.caller.services.environment.values()
        return self._secrets

    def log_line(self, level: str, text: str) -> None:
        """Write one line of the script's output to the log, within the call's budgets."""
        if self._log_silenced:
            return
        self.log_lines += 1
        room = min(self.max_log_line_chars, self.max_log_chars - self.log_chars)
        if self.log_lines > self.max_log_lines or room <= 0:
            self._log_silenced = True
            limit = (
                f"{self.max_log_lines:,} lines"
                if self.log_lines > self.max_log_lines
                else f"{self.max_log_chars:,} characters"
            )
            script_log.warning("[%s] more output suppressed (limit %s)", self.script, limit)
            return
        shown = text if len(text) <= room else f"{text[:room]}…[{len(text) - room:,} more characters cut]"
        self.log_chars += min(len(text), room)
        number = _LOG_LEVELS.get(level, INFO)
        if script_log.isEnabledFor(number):
            script_log.log(number, "[%s] %s", self.script, repair_text(shown))


HelperFunction = Callable[..., JSONValue]
SpanBefore = Callable[[ScriptCall, Sequence[JSONValue]], Attributes]
SpanAfter = Callable[[JSONValue], Attributes]


def _nothing(*_: object) -> Attributes:
    return {}


@dataclass(frozen=True)
class Traced:
    """How a helper's calls show in a trace (S26.1): a span named after the helper.

    `before` gives its attributes from the call and the script's arguments,
    `after` from the helper's result (an `error.type` among them marks the
    call failed); both get plain values, run only for a span that records,
    and must never give a secret: no header, query string, argument list or
    environment value. `client`: the call leaves the process (SpanKind CLIENT).
    """

    before: SpanBefore = _nothing
    after: SpanAfter = _nothing
    client: bool = False


@dataclass(frozen=True)
class Helper:
    """A registered helper, the number of script arguments it accepts, and how a trace shows it."""

    name: str
    function: HelperFunction
    min_args: int
    max_args: int | None
    traced: Traced | None = None

    def check_arity(self, count: int) -> None:
        if count < self.min_args:
            raise HelperError(f"{self.name}: expected at least {self.min_args} argument(s), got {count}")
        if self.max_args is not None and count > self.max_args:
            raise HelperError(f"{self.name}: expected at most {self.max_args} argument(s), got {count}")


def _script_arity(function: HelperFunction) -> tuple[int, int | None]:
    """Bounds on script arguments: the function's parameters minus the ScriptCall."""
    params = list(inspect.signature(function).parameters.values())[1:]
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        positional = [p for p in params if p.kind is not inspect.Parameter.VAR_POSITIONAL]
        return sum(p.default is inspect.Parameter.empty for p in positional), None
    required = sum(p.default is inspect.Parameter.empty for p in params)
    return required, len(params)


class HelperTable:
    """Helpers by name; `invoke` is the single entry both engines call.

    Helpers given with `register_later` are named at once (an engine binds
    every name) and registered when a script first calls one of them, so a
    command whose scripts call no helper of an area never imports its module.
    """

    def __init__(self) -> None:
        self._helpers: dict[str, Helper] = {}
        self._known: dict[str, None] = {}  # every name, registered or later, in order
        self._names: tuple[str, ...] = ()  # asked for at every script call
        self._later: dict[str, Callable[[HelperTable], None]] = {}  # name → what registers it
        self._registering = threading.Lock()

    def register(self, name: str, function: HelperFunction, *, traced: Traced | None = None) -> None:
        """Add helper `name`; with `traced`, each call is a span when telemetry records (S26.1)."""
        if name in self._helpers or name in self._later:
            raise ValueError(f"helper {name!r} is already registered")
        low, high = _script_arity(function)
        self._helpers[name] = Helper(name, function, low, high, traced)
        self._name(name)

    def register_later(self, names: Sequence[str], register: Callable[[HelperTable], None]) -> None:
        """Helpers `names`, which `register(table)` registers when one of them is first called
        (or the table is walked); a name already taken is refused now, as `register` would."""
        for name in names:
            if name in self._known:
                raise ValueError(f"helper {name!r} is already registered")
        for name in names:
            self._later[name] = register
            self._name(name)

    def _name(self, name: str) -> None:
        if name not in self._known:
            self._known[name] = None
            self._names = tuple(self._known)

    def _register_now(self, name: str) -> None:
        """Run what registers `name` (and the helpers registered with it), once, whichever thread asks."""
        with self._registering:
            register = self._later.get(name)
            if register is None:  # registered already (maybe by another thread), or never named
                return
            for other in [n for n, r in self._later.items() if r is register]:
                del self._later[other]
            register(self)

    def names(self) -> tuple[str, ...]:
        return self._names

    def __contains__(self, name: object) -> bool:
        return name in self._known

    def __iter__(self) -> Iterator[Helper]:
        for name in list(self._later):
            self._register_now(name)
        return iter([self._helpers[name] for name in self._known if name in self._helpers])

    def invoke(self, name: str, call: ScriptCall, args: Sequence[JSONValue]) -> JSONValue:
        """Run a helper for a script; every failure comes out as a HelperError.

        Trailing nulls are dropped first, so `http_get(url, undefined)` in JS
        and `http_get(url, ())` in Rhai mean `http_get(url)`.
        """
        helper = self._helpers.get(name)
        if helper is None and name in self._known:
            self._register_now(name)
            helper = self._helpers.get(name)
        if helper is None:
            raise HelperError(f"{name}: no such helper")
        args = list(args)
        while args and args[-1] is None and len(args) > helper.min_args:
            args.pop()
        helper.check_arity(len(args))
        traced = helper.traced
        span = None if traced is None else _span(helper, traced, call, args)
        if traced is None or span is None:
            return _run(helper, call, args)
        with span:
            result = _run(helper, call, args)
            span.set(_attributes(helper, traced.after, result))
            return result


def _span(helper: Helper, traced: Traced, call: ScriptCall, args: Sequence[JSONValue]) -> HelperSpan | None:
    """The call's span with its first attributes, or None when telemetry does not record it."""
    span = helper_span(helper.name, client=traced.client, secrets=call.secrets)
    if span is not None:
        span.set(_attributes(helper, traced.before, call, args))
    return span


def _attributes(helper: Helper, give: Callable[..., Attributes], *values: object) -> Attributes:
    """What `give` says of the call; a bug of ours there costs the attributes, never the call."""
    try:
        return give(*values)
    except Exception:
        log.debug("helper %s: its span attributes failed", helper.name, exc_info=True)
        return {}


def _run(helper: Helper, call: ScriptCall, args: Sequence[JSONValue]) -> JSONValue:
    """The helper's result; every failure comes out as a HelperError."""
    name = helper.name
    try:
        return helper.function(call, *args)
    except HelperError:
        raise
    except Exception as exc:  # a helper bug must not take the script host down
        if any(map(has_lone_surrogate, _texts(args))):
            # the script's text met a UTF-8 boundary (a path, a program, a store): its fault, not ours
            log.debug("helper %s refused invalid Unicode for %s", name, call.script, exc_info=True)
            raise HelperError(
                f"{name}: an argument is not valid Unicode: it holds a lone surrogate "
                "(U+D800 to U+DFFF alone), which has no UTF-8 form"
            ) from None
        log.exception("helper %s failed for %s", name, call.script)
        raise HelperError(f"{name}: internal error: {type(exc).__name__}: {exc}") from exc


def _texts(values: Sequence[JSONValue]) -> Iterator[str]:
    """Every string in `values`, keys included, at any depth."""
    pending = list(values)
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            yield value
        elif isinstance(value, list):
            pending.extend(value)
        elif isinstance(value, dict):
            pending.extend(value)
            pending.extend(value.values())


__all__ = ["Helper", "HelperFunction", "HelperTable", "ScriptCall", "Traced"]

"""The methods compiled code sends to the general path at once (codegen/chains.py
`NEVER_PURE`) have no pure native needing no context in the standard library: the fast path
it skips would never have found one."""

from __future__ import annotations

from agentkernel.rhai import Engine
from agentkernel.rhai.codegen.chains import NEVER_PURE
from agentkernel.rhai.stdlib import build_library


def test_every_method_sent_to_the_general_path_has_no_pure_native() -> None:
    library = build_library()
    overloads: dict[tuple[str, int], list[object]] = {}
    for key, native in library._exact.items():
        overloads.setdefault((key[0], len(key) - 2), []).append(native)
    for (name, arity), natives in library._loose.items():
        overloads.setdefault((name, arity - 1), []).extend(natives)
    for method in NEVER_PURE:
        assert method in overloads, method
        fast = [n for n in overloads[method] if n.pure and not n.needs_context]  # type: ignore[attr-defined]
        assert not fast, (method, fast)


def test_such_methods_run_as_before() -> None:
    source = 'let w = "b a c".split(); let s = w.filter(|x| x != "a"); s.sort(); s.map(|x| x + "!")'
    assert Engine().eval(source) == ["b!", "c!"]
    assert "pure_method" not in Engine().compile(source).module.source

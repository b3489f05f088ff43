"""valid_unicode.py: lone surrogates become U+FFFD, everything else is left alone."""

from __future__ import annotations

from agentkernel.types import JSONValue
from agentkernel.util.valid_unicode import has_lone_surrogate, repair_text, repair_value, surrogate_warning


def test_text() -> None:
    assert repair_text("a\ud800b\udfffc") == "a\ufffdb\ufffdc"
    plain = "ascii and é and 😀"
    assert repair_text(plain) is plain and not has_lone_surrogate(plain)


def test_values_in_place_keys_included() -> None:
    value: dict[str, JSONValue] = {"k\udc00": ["x\ud83d", {"y": "\udbff"}, 1, None, True], "ok": "fine"}
    repaired, changed = repair_value(value)
    assert changed and repaired is value
    assert value == {"k\ufffd": ["x\ufffd", {"y": "\ufffd"}, 1, None, True], "ok": "fine"}
    assert list(value) == ["k\ufffd", "ok"]  # order kept
    assert repair_value(value) == (value, False)


def test_scalars_and_deep_values() -> None:
    assert repair_value("\ud800") == ("\ufffd", True)
    assert repair_value(5) == (5, False)
    deep: JSONValue = ["\ud800"]
    for _ in range(10_000):
        deep = [deep]
    assert repair_value(deep)[1] is True  # iterative: no recursion limit


def test_the_warning() -> None:
    assert surrogate_warning("the result") == (
        "the result contained invalid Unicode (lone surrogate); replaced with U+FFFD"
    )

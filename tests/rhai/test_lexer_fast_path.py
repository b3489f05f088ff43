"""The lexer's fast path takes every token exactly as the character-by-character path does.

`_Lexer._fast_tokens` (issue 14 §4: compiles as fast as they run) takes the
common tokens with one regular expression and leaves the rest to
`_next_token`. Here the same texts go through both — the real lexer, and one
whose fast path is switched off — and every token (kind, value, type of the
value, position) must be the same: the conformance sources, the benchmark
scripts, the parser tests' mutations, random symbol soup, and positions past
the reference's u16 saturation.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkernel.rhai.syntax import lexer
from agentkernel.rhai.syntax.compile_clock import CompileClock
from tests.rhai.conformance import load_cases
from tests.rhai.test_parser import _mutations

ROOT = Path(__file__).resolve().parents[2]

# Fragments near every quirk the fast path must leave alone (or take exactly).
FRAGMENTS = [
    "a", "_", "_1", "__x", "x_1", "let ", "fn ", "print", "this", "0", "7", "007", "1_000", "1.", "1.5",
    "1e3", "0x1f", "0b12", "9223372036854775807", "9223372036854775808", "-", "+", "-1", "- 1", '"ab"',
    '""', '"a""b"', '"a\\nb"', '"é😀"', "'c'", "`t ${x} u`", "`${", "#{", '#"raw"#', "# {", "#!", "?.",
    "??", "?[", "::", "::<", "=", "==", "===", "!=", "!==", "!", "!in", "!inx", "..", "..=", "...",
    "**", "**=", "<<=", ">>", "()", "(*", "*)", "=>", "->", "<-", "|>", "<|", "++", "--", ":=", ":;",
    "/", "/=", "//", "// note\n", "// note\r\n", "// note\r", "/* c */", "/*", "{", "}", "(", ")", "[",
    "]", ";", ":", ",", ".", "|", "||", "&", "&&", "^", "%", "$", "~", "@", "\\", " ", "  ", "\t", "\n",
    "\r", "\r\n", "\x0b", "\x0c",
]  # fmt: skip


class _SlowLexer(lexer._Lexer):
    """The lexer with its fast path switched off: every token through `_next_token`."""

    def _fast_tokens(self, tokens: list[lexer.Token]) -> None:
        return None


def _tokens(text: str, max_string_size: int = 0, *, fast: bool = True) -> list[tuple[object, ...]]:
    kind = lexer._Lexer if fast else _SlowLexer
    tokens = kind(text, max_string_size, CompileClock()).run()
    return [(t.kind, t.value, type(t.value).__name__, t.pos) for t in tokens]


def _texts() -> Iterator[str]:
    for case in load_cases():
        if "src" in case.data:
            yield case.data["src"]
    for path in sorted((ROOT / "benchmarks" / "rhai").glob("*.rhai")):
        yield path.read_text(encoding="utf-8")
    yield from _mutations(seed=14, count=3000)
    rng = random.Random(14)
    for _ in range(20_000):
        yield "".join(rng.choice(FRAGMENTS) for _ in range(rng.randrange(1, 12)))


def test_the_fast_path_is_on_for_ordinary_code() -> None:
    """Not vacuous: an ordinary line is taken by the fast path, not left to `_next_token`."""
    source = 'let total = items.len() + 2; // sum\nif total >= 3 { print("big"); }'
    lexing = lexer._Lexer(source, 0, CompileClock())
    tokens: list[lexer.Token] = []
    lexing._fast_tokens(tokens)
    assert [t.kind for t in tokens][:5] == ["let", "IDENT", "=", "IDENT", "."]
    assert len(tokens) == len(lexer.tokenize(source)) - 1  # all but EOF


@pytest.mark.parametrize("max_string_size", [0, 3])
def test_fast_and_slow_paths_agree_on_every_token(max_string_size: int) -> None:
    differing = [
        text
        for text in _texts()
        if _tokens(text, max_string_size) != _tokens(text, max_string_size, fast=False)
    ]
    assert differing == []


@pytest.mark.parametrize(
    "text",
    [
        "\n" * 70_000 + "let x = 1; // c\n y",
        " " * 70_000 + 'abc "x" 12 //q',
        "\n" * 65_534 + "a\nb\n\nc // x\r\nd",
        "x" * 70_000 + " y",
        '"' + "a" * 70_000 + '" b',
        " " * 65_533 + "a b  c\n d",
    ],
)
def test_positions_saturate_the_same_way(text: str) -> None:
    """Past line or column 65,535 positions stay there, as the reference's u16 do."""
    assert _tokens(text) == _tokens(text, fast=False)

"""Telling a typo from a name of the author's own: "did you mean …" suggestions.

YAML files may carry custom fields (S2.1) and JSON Schemas custom keywords,
so an unknown name is not an error by itself. It is one when it is so close
to a known name that it can only be a misspelling of it: `paramaters`,
`event`, `requried`, `enmu`, `beforeUserMessage`. Closeness is difflib's
ratio on the lower-cased names; names shorter than four letters are never
taken for typos (`ui` and `url` differ by one letter and are both honest).
"""

from __future__ import annotations

from collections.abc import Iterable

MIN_LENGTH = 4
# 0.75 lets a swap of two letters in a four-letter name through (`enmu`, `tpye`)
# while `repos`, `api_base`, `currency`, `rates` or `timeout` stay custom fields.
CUTOFF = 0.75


def close_match(word: str, known: Iterable[str], cutoff: float = CUTOFF) -> str | None:
    """The known name `word` is a near miss of, or None; an exact match is not a miss."""
    names = [k for k in known if len(k) >= MIN_LENGTH]
    if len(word) < MIN_LENGTH or word in names:
        return None
    by_lower = {k.lower(): k for k in names}
    import difflib  # when a name is checked against others, not by every command that could

    found = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=cutoff)
    return by_lower[found[0]] if found else None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`; did you mean 'x'?` to append to a message, or "" when nothing is close."""
    match = close_match(word, known)
    return f"; did you mean {match!r}?" if match is not None else ""


__all__ = ["close_match", "did_you_mean"]

"""Text helpers shared by the string natives: Rust's whitespace, splitting and
the reference's start/length arithmetic on characters (a Python str indexes
code points, which are Rust `char`s)."""

from __future__ import annotations

import re

from agentkernel.rhai.runtime.numeric import I64_MAX
from agentkernel.rhai.runtime.values import RangeVal

# Rust's `char::is_whitespace` (Unicode White_Space); Python's isspace() adds \x1c-\x1f.
WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
# compiled on first use (by `re`, which keeps it): a text with \x1c-\x1f is rare, every start-up is not
_WORD = f"[^{re.escape(WHITESPACE)}]+"


def trim(text: str) -> str:
    return text.strip(WHITESPACE)


def split_whitespace(text: str) -> list[str]:
    """Rust's `split_whitespace`: runs of White_Space separate, empty pieces dropped.

    Python's own `split()` cuts at the same characters and at \x1c-\x1f too: it is used,
    four times cheaper than the pattern, for a text that holds none of those four."""
    if "\x1c" in text or "\x1d" in text or "\x1e" in text or "\x1f" in text:
        return re.findall(_WORD, text)
    return text.split()


def split(text: str, sep: str, limit: int | None = None) -> list[str]:
    """Rust's `split` / `splitn(limit)`, including an empty separator
    (`"ab".split("")` is `["", "a", "b", ""]`)."""
    if sep:
        return text.split(sep) if limit is None else text.split(sep, limit - 1)
    cuts = list(range(len(text) + 1))
    if limit is not None:
        cuts = cuts[: limit - 1]
    pieces: list[str] = []
    last = 0
    for cut in cuts:
        pieces.append(text[last:cut])
        last = cut
    pieces.append(text[last:])
    return pieces


def rsplit(text: str, sep: str, limit: int | None = None) -> list[str]:
    """Rust's `rsplit` / `rsplitn(limit)`: pieces from the end."""
    if sep:
        pieces = text.split(sep) if limit is None else text.rsplit(sep, limit - 1)
        return pieces[::-1]
    whole = split(text, "")[::-1]
    if limit is None or len(whole) <= limit:
        return whole
    head = whole[: limit - 1]
    return [*head, text[: len(text) - len("".join(head))]]


def offset_len(count: int, start: int, length: int) -> tuple[int, int]:
    """The reference's `calc_offset_len`: a negative start counts from the end (clamped
    to 0), a start past the end gives (count, 0), and the length is clamped."""
    if start < 0:
        start = count - min(-start, count)
    elif start >= count:
        return count, 0
    if length <= 0:
        return start, 0
    return start, min(length, count - start)


def index_from_end(count: int, index: int) -> int | None:
    """The reference's `calc_index` (negative counts from the end); None when out of range."""
    if index < 0:
        return count + index if -index <= count else None
    return index if index < count else None


def exclusive_bounds(start: int, end: int) -> tuple[int, int]:
    """A `start..end` argument as (start, length), as the natives taking ranges compute it."""
    start = max(start, 0)
    return start, max(end, start) - start


def inclusive_bounds(start: int, end: int) -> tuple[int, int]:
    """A `start..=end` argument as (start, length)."""
    start = max(start, 0)
    return start, min(max(end, start), I64_MAX - 1) - start + 1


def select(text: str, start: int, length: int) -> str | None:
    """The characters `sub_string(start, len)` and `crop(start, len)` keep; None means
    "nothing" (the reference then gives an empty string)."""
    count = len(text)
    if not text or length <= 0:
        return None
    if start < 0:
        offset = count - min(-start, count)
    elif start >= count:
        return None
    else:
        offset = start
    return text[offset : offset + min(length, count - offset)]


__all__ = [
    "WHITESPACE",
    "exclusive_bounds",
    "inclusive_bounds",
    "index_from_end",
    "offset_len",
    "rsplit",
    "select",
    "split",
    "split_whitespace",
    "trim",
]


def range_span(r: RangeVal) -> tuple[int, int]:
    """A range argument as (start, count), negatives clamped, as `chars(range)`/`bits(range)` read it."""
    start = max(r.start, 0)
    if r.inclusive:
        end = min(max(r.end, start - 1), I64_MAX - 1)
        return start, end - start + 1
    return start, max(r.end, start) - start

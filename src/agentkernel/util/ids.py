"""Random ids in the form of `str(uuid.uuid4())`, drawn without importing `uuid`.

`uuid` imports `platform` (to learn the system, for its time-based ids) when
it is first imported: about 10 M instructions, 2 % of an `agentkernel tool
run`'s start-up, that draws one id for its caller (docs/benchmarks.md). A
version-4 UUID is 122 random bits with the version and variant bits set;
this draws them from `os.urandom`, as `uuid.uuid4()` does, and writes them as
`str()` of that UUID would.
"""

from __future__ import annotations

import os

_VARIANT_CLEAR = ~(0xC000 << 48)
_VARIANT_RFC_4122 = 0x8000 << 48
_VERSION_CLEAR = ~(0xF000 << 64)
_VERSION_4 = 4 << 76


def new_uuid() -> str:
    """`str(uuid.uuid4())`: 32 random hex digits, version 4, RFC 4122 variant, in five groups."""
    number = int.from_bytes(os.urandom(16), "big")
    number = (number & _VARIANT_CLEAR & _VERSION_CLEAR) | _VARIANT_RFC_4122 | _VERSION_4
    digits = f"{number:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


__all__ = ["new_uuid"]

"""Random ids as `str(uuid.uuid4())` writes them, drawn without `uuid` (agentkernel/util/ids.py)."""

from __future__ import annotations

import uuid

from agentkernel.util.ids import new_uuid


def test_a_new_id_reads_back_as_a_random_uuid_written_as_uuid_writes_it() -> None:
    drawn = [new_uuid() for _ in range(2000)]
    for text in drawn:
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
    assert len(set(drawn)) == len(drawn)
    # every one of the 122 random bits is drawn: each is seen both set and clear
    version_and_variant = (0xF000 << 64) | (0xC000 << 48)
    seen_set = seen_clear = 0
    for text in drawn:
        number = uuid.UUID(text).int
        seen_set |= number
        seen_clear |= ~number
    random_bits = ((1 << 128) - 1) & ~version_and_variant
    assert seen_set & random_bits == random_bits and seen_clear & random_bits == random_bits

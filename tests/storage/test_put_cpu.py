"""The put path's shortcuts store exactly what the plain computations store."""

from __future__ import annotations

import random

from threadloom.checkpoint import ids
from threadloom.checkpoint.storage import packing


def test_next_version_hands_over_exactly_the_packed_form() -> None:
    """ids.MADE (versions next_version split for the storage core) holds what
    parsing the text gives, and pack_version returns it either way."""
    version = None
    handed = 0
    for i in range(5000):
        version = ids.next_version(version if i % 500 else None)
        made = ids.MADE.get(version)
        parsed = packing._pack_version(version)
        if made is not None:
            handed += 1
            assert made == parsed
        assert packing.pack_version(version) == parsed
        assert packing.unpack_version(packing.pack_version(version)) == version
    assert handed > 4000  # the usual "0.<digits>" random part


def test_odd_random_parts_are_not_handed_over(monkeypatch) -> None:
    """A random part with an exponent, a leading zero or padding is left to
    the parser (and still round-trips)."""
    for value in (1.5e-05, 0.5, 0.0123456789012345, 0.0):
        monkeypatch.setattr(random, "random", lambda v=value: v)
        version = ids.next_version("00000000000000000000000000000007.0.5")
        assert version == f"{8:032}.{value:016}"
        assert version not in ids.MADE
        assert packing.unpack_version(packing.pack_version(version)) == version

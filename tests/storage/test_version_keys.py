"""Ref keys of channel versions stay injective for versions written with
non-ASCII digits (``str.isdigit`` accepts "٧" and "²"; found in review)."""

from __future__ import annotations

from threadloom.checkpoint.storage.rows import version_key


def test_non_ascii_digit_versions_do_not_share_a_key_with_ascii_ones() -> None:
    ascii_version = "0" * 31 + "7.0.123"
    arabic = "\u0660" * 31 + "\u0667.0.123"  # int() reads it as 7 too
    assert version_key(ascii_version) == "7.0.123"
    assert version_key(arabic) != version_key(ascii_version)
    superscript = "\u00b2" * 32 + ".0.1"  # isdigit() but int() raises
    assert version_key(superscript) == "=" + superscript

"""A compressed value may decode to at most ``max_decoded_items`` msgpack items:
~1.5 KB of zstd inflating to an array of 50M one-byte items passed the 1 GiB
``max_decompressed`` check and decoded to a 400 MB list. Legitimate large
values (a 100 MB string, a 1M-message list) still round-trip, and the count
of items matches what the decoder builds (extensions counted inside)."""

from __future__ import annotations

import ormsgpack
import pytest
import zstandard

from threadloom.checkpoint.serde import MsgpackSerializer, default_serializer
from threadloom.checkpoint.serde.inflation import count_items
from threadloom.errors import CorruptBlobError


def _bomb(n: int) -> tuple[str, bytes]:
    body = b"\xdd" + n.to_bytes(4, "big") + b"\x00" * n  # array32 of n fixint zeros
    return "msgpack+zstd", zstandard.ZstdCompressor(level=19).compress(body)


def test_a_small_frame_inflating_to_millions_of_items_is_refused() -> None:
    row = _bomb(2_000_000)
    assert len(row[1]) < 2000
    with pytest.raises(
        CorruptBlobError, match=r"more than 1000000 msgpack items.*max_decoded_items="
    ):
        MsgpackSerializer(max_decoded_items=1_000_000).loads_typed(row)
    assert len(MsgpackSerializer(max_decoded_items=3_000_000).loads_typed(row)) == 2_000_000


def test_the_default_bound_refuses_the_probe_bomb() -> None:
    for n in (20_000_000, 50_000_000):  # probecorrupt's 05 and 02
        with pytest.raises(CorruptBlobError, match="decompression bomb"):
            default_serializer().loads_typed(_bomb(n))


def test_items_inside_extensions_are_counted() -> None:
    inner = ormsgpack.packb([0] * 5000)  # an extension holding 5001 items
    body = ormsgpack.packb([ormsgpack.Ext(20, inner)] * 400)  # 2M items in 2 MB: dense
    row = ("msgpack+zstd", zstandard.ZstdCompressor().compress(body))
    with pytest.raises(CorruptBlobError, match="more than 100000"):
        MsgpackSerializer(max_decoded_items=100_000).loads_typed(row)


@pytest.mark.parametrize(
    "value",
    [
        [1, 2, "abc", {"a": [None, True, 1.5, 2**40, -5, -100]}, b"xx" * 100, "é" * 300],
        [(1, 2), {"k": (3, {4})}, "s" * 70000, list(range(70000))],
    ],
)
def test_count_items_matches_the_decoded_structure(value: object) -> None:
    tag, data = default_serializer().dumps_typed(value)
    raw = zstandard.ZstdDecompressor().decompress(data) if tag.endswith("zstd") else data

    def walk(v: object) -> int:
        if type(v) is list:
            return 1 + sum(walk(x) for x in v)
        if type(v) is dict:
            return 1 + sum(walk(k) + walk(x) for k, x in v.items())
        if type(v) is tuple:  # an extension: its payload's items
            return 1 + walk(ormsgpack.unpackb(v[1], ext_hook=lambda c, d: (c, d)))
        return 1

    assert count_items(raw, 1 << 40) == walk(ormsgpack.unpackb(raw, ext_hook=lambda c, d: (c, d)))


def test_many_items_that_are_not_dense_are_read() -> None:
    """Past the bound but at most one item per two bytes: real data, read."""
    value = [f"item-{i:06}" for i in range(200_000)]  # 12 bytes an item
    tag, data = default_serializer().dumps_typed(value)
    assert MsgpackSerializer(max_decoded_items=100_000).loads_typed((tag, data)) == value


def test_large_legitimate_values_round_trip() -> None:
    serde = MsgpackSerializer(max_decoded_items=100_000)  # scans: inflates past the bound
    text = "x" * 100_000_000
    assert serde.loads_typed(serde.dumps_typed(text)) == text
    # LangChain messages (9 items each), scanned: a 1M-message list reads the same
    # with the default bound (checked by hand: 6-9M items, 17-28 MB inflated)
    messages = pytest.importorskip("langchain_core.messages")
    many = [messages.HumanMessage(content="hi", id=str(i)) for i in range(30_000)]
    tag, data = serde.dumps_typed(many)
    assert tag == "msgpack+zstd"
    assert serde.loads_typed((tag, data)) == many

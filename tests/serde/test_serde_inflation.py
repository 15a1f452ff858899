"""A compressed value may decode to at most ``max_decoded_items`` msgpack items:
~1.5 KB of zstd inflating to an array of 50M one-byte items passed the 1 GiB
``max_decompressed`` check and decoded to a 400 MB list, and 4 KB of 25M
one-character strings (two bytes an item) passed a density rule. The writer
stores a value holding more items uncompressed, so what it writes reads back;
legitimate large values (a 100 MB string, a long message list) round-trip, and
the count of items matches what the decoder builds (extensions counted inside)."""

from __future__ import annotations

import ormsgpack
import pytest
import zstandard

from threadloom.checkpoint.serde import MsgpackSerializer, default_serializer, inflation
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


def test_two_byte_items_past_the_bound_are_refused() -> None:
    """A density rule (refuse only over one item per two bytes) let this through:
    at the default bound, 4 KB of zstd inflating to 25M one-character strings."""
    body = b"\xdd" + (300_000).to_bytes(4, "big") + b"\xa1a" * 300_000
    row = ("msgpack+zstd", zstandard.ZstdCompressor(level=19).compress(body))
    with pytest.raises(CorruptBlobError, match="more than 100000 msgpack items"):
        MsgpackSerializer(max_decoded_items=100_000).loads_typed(row)


def test_a_value_past_the_bound_is_written_uncompressed_and_reads_back() -> None:
    """[0] * 20M written by the default serializer used to be stored as 634 bytes
    of zstd that every read with the default settings refused."""
    serde = MsgpackSerializer(max_decoded_items=100_000)
    for value in ([0] * 200_000, [f"item-{i:06}" for i in range(200_000)]):
        tag, data = serde.dumps_typed(value)
        assert tag == "msgpack"
        assert serde.loads_typed((tag, data)) == value
    small = [0] * 90_000  # within the bound: compressed as before
    tag, data = serde.dumps_typed(small)
    assert tag == "msgpack+zstd" and serde.loads_typed((tag, data)) == small


def test_the_writer_never_counts_items(monkeypatch) -> None:
    """It counted every value over the bound (16 MB by default) in Python on
    every write (350k chat dicts: 0.07 -> 0.77 s); a value larger than the
    bound is now stored uncompressed whatever it holds, one under it
    compressed as before."""

    def counted(*args: object) -> int:
        raise AssertionError("the writer counted items")

    monkeypatch.setattr(inflation, "count_items", counted)
    serde = MsgpackSerializer(max_decoded_items=100_000)
    text = "x" * 150_000  # one item, but 150 KB of msgpack
    tag, data = serde.dumps_typed(text)
    assert tag == "msgpack" and serde.loads_typed((tag, data)) == text
    tag, data = serde.dumps_typed("x" * 90_000)
    assert tag == "msgpack+zstd"
    tag, data = default_serializer().dumps_typed(text)  # far under the default bound
    assert tag == "msgpack+zstd"


def test_a_row_compressed_past_the_bound_says_how_to_read_it() -> None:
    """Rows an earlier threadloom compressed with more items than the bound."""
    old = MsgpackSerializer(max_decoded_items=1 << 30).dumps_typed([0] * 200_000)
    assert old[0] == "msgpack+zstd"
    with pytest.raises(CorruptBlobError, match=r"earlier threadloom.*max_decoded_items="):
        MsgpackSerializer(max_decoded_items=100_000).loads_typed(old)
    assert len(MsgpackSerializer(max_decoded_items=300_000).loads_typed(old)) == 200_000


def test_runs_of_same_size_items_are_counted_exactly() -> None:
    serde = MsgpackSerializer(compress_threshold=None)
    for value in (
        ["abc"] * 1000 + ["ab", "abc", "abc"] + [1.5] * 7 + [70000] * 9 + [None] * 3,
        [ormsgpack.Ext(9, ormsgpack.packb(["xy"] * 50))] * 20,
        [2**40 + i for i in range(5000)],
    ):
        raw = serde.dumps_typed(value)[1]
        expected = 1 + sum(count_items(ormsgpack.packb(v), 1 << 30) for v in value)
        assert count_items(raw, 1 << 30) == expected
        for cut in (len(raw) - 1, len(raw) - 3, len(raw) // 2):  # a run cut short
            n = count_items(raw[:cut], 1 << 30)
            assert n >= 1 and n == count_items(bytes(raw[:cut]), 1 << 30)


def test_counting_long_runs_of_short_strings_is_exact() -> None:
    """5M 3-letter strings are counted by runs (~0.01 s, against ~0.7 s item by
    item in Python; no timing is asserted here: the suite has no timing tests)."""
    raw = MsgpackSerializer(compress_threshold=None).dumps_typed(["abc"] * 5_000_000)[1]
    assert count_items(raw, 1 << 30) == 5_000_001


def test_large_legitimate_values_round_trip() -> None:
    serde = MsgpackSerializer(max_decoded_items=100_000)
    text = "x" * 100_000_000
    assert serde.loads_typed(serde.dumps_typed(text)) == text  # stored as it is
    old = MsgpackSerializer(max_decoded_items=1 << 30).dumps_typed(text)  # an earlier writer's
    assert old[0] == "msgpack+zstd"
    assert serde.loads_typed(old) == text  # counted: one item, inflated past the bound
    messages = pytest.importorskip("langchain_core.messages")
    many = [messages.HumanMessage(content="hi", id=str(i)) for i in range(30_000)]
    tag, data = serde.dumps_typed(many)  # ~200k items: stored as it is
    assert tag == "msgpack"
    assert serde.loads_typed((tag, data)) == many
    tag, data = default_serializer().dumps_typed(many)  # within the default bound
    assert tag == "msgpack+zstd"
    assert default_serializer().loads_typed((tag, data)) == many

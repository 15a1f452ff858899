"""Bounding what a compressed msgpack value may decode to (decompression bombs).

``max_decompressed`` bounds the inflated bytes, but not the objects they
decode to: every msgpack item is at least one byte and becomes a Python object
or pointer of 8-72 bytes, so ~1.5 KB of zstd inflating to an array of 50M
one-byte zeros (50 MB, under the 1 GiB limit) used to decode to a 400 MB list,
and a 1 GiB frame could ask for tens of GB.

So a compressed value holding more than ``max_decoded_items`` items (every
array, map, scalar, string and extension, counted inside extensions too) is
refused, whatever its density: a rule sparing "sparse" values (one item per
two bytes) let a 4 KB frame of 25M one-character strings through (+1.7 GB).
What a compressed value decodes to thus stays under ~72 bytes x
``max_decoded_items``. An uncompressed value is never counted, since what it
decodes to is proportional to the bytes actually stored. Rows compressed by an
earlier threadloom with more items are refused with advice to raise the bound.

Since no item is smaller than a byte, a value of at most ``max_decoded_items``
bytes cannot hold more and is not scanned (the usual case costs one
comparison); a larger one is counted by :func:`count_items` (a run of one-byte
items in one regex match, a run of same-size strings or numbers by comparing
bytes at a stride), which stops once past the bound.

The writer keeps its own values readable without counting anything
(:func:`compressible`): a value whose msgpack is larger than the bound is
stored uncompressed whatever it holds. Counting it instead (to compress the
ones holding few items) cost every write of such a value a Python pass over
it, 10-20x its packing (350k chat dicts: 0.07 -> 0.77 s), to compress values
only over 16 MB by default, far above what checkpoints usually hold.
"""

from __future__ import annotations

import re

from threadloom.errors import CorruptBlobError

__all__ = ["DEFAULT_MAX_DECODED_ITEMS", "check_items", "compressible", "count_items"]

DEFAULT_MAX_DECODED_ITEMS = 1 << 24
"""~16.8M items: decoding this many one-byte items costs ~134 MB (small ints)
to ~1.2 GB (empty dicts) at most."""

# one-byte items: positive/negative fixints, fixmap/fixarray headers (their
# items follow and are counted themselves), the empty fixstr, nil, false, true
_ONE_BYTE = re.compile(rb"[\x00-\xa0\xc0\xc2\xc3\xe0-\xff]+")

# lead byte -> (header bytes, length field bytes, is an extension); a length
# field of 0 means the header is the whole item
_SIZES: dict[int, tuple[int, int, bool]] = {
    0xC1: (1, 0, False),  # never used: counted, left to the decoder to refuse
    0xCA: (5, 0, False), 0xCB: (9, 0, False),  # float 32/64
    0xCC: (2, 0, False), 0xCD: (3, 0, False), 0xCE: (5, 0, False), 0xCF: (9, 0, False),
    0xD0: (2, 0, False), 0xD1: (3, 0, False), 0xD2: (5, 0, False), 0xD3: (9, 0, False),
    0xDC: (3, 0, False), 0xDD: (5, 0, False), 0xDE: (3, 0, False), 0xDF: (5, 0, False),
    0xC4: (2, 1, False), 0xC5: (3, 2, False), 0xC6: (5, 4, False),  # bin 8/16/32
    0xD9: (2, 1, False), 0xDA: (3, 2, False), 0xDB: (5, 4, False),  # str 8/16/32
    0xC7: (3, 1, True), 0xC8: (4, 2, True), 0xC9: (6, 4, True),  # ext 8/16/32
}  # fmt: skip
_FIXEXT = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}

# lead byte -> the size of an item of that lead when it is fixed: a run of
# such items (a list of short ids, floats, 3-letter tags) is counted by
# :func:`_run` in C, not an item at a time in Python
_FIXED = {lead: 1 + (lead & 0x1F) for lead in range(0xA1, 0xC0)} | {
    lead: header for lead, (header, field, ext) in _SIZES.items() if not field and lead != 0xC1
}


def _run(data: bytes, pos: int, end: int, lead: int, size: int) -> int:
    """Where the run of whole ``size``-byte items led by ``lead`` starting at
    ``pos`` ends: the lead bytes at that stride are compared in C, in windows
    growing 4x."""
    mark, window = bytes([lead]), 8
    while pos < end:
        stride = data[pos : min(end, pos + size * window) : size]
        k = len(stride) - len(stride.lstrip(mark))
        if k and pos + k * size > end:  # the last one runs past the end
            k -= 1
        pos += k * size
        if k < len(stride) or not k:
            break
        window *= 4
    return pos


def count_items(data: bytes, limit: int) -> int:
    """The number of msgpack items in ``data``, or some number above ``limit``
    once it is passed. An extension's payload is counted as the msgpack it
    holds (threadloom's and LangGraph's always do); a payload that is not,
    item by item, is counted as one item per byte, never fewer than it holds.
    """
    n, pos, end = 0, 0, len(data)
    ends: list[int] = []  # the ends of the extensions being counted
    match = _ONE_BYTE.match
    while True:
        if pos >= end:
            if not ends:
                return n
            pos, end = end, ends.pop()
            continue
        run = match(data, pos, end)
        if run is not None:
            n += run.end() - pos
            if n > limit:
                return n
            pos = run.end()
            continue
        lead = data[pos]
        n += 1
        if 0xA1 <= lead <= 0xBF:  # fixstr
            size = 1 + (lead & 0x1F)
        elif lead in _FIXEXT:
            ends.append(end)
            pos, end = pos + 2, min(pos + 2 + _FIXEXT[lead], end)
            continue
        else:
            header, field, ext = _SIZES[lead]
            size = header
            if field:
                size += int.from_bytes(data[pos + 1 : pos + 1 + field], "big")
                if ext and pos + size <= end:
                    ends.append(end)
                    pos, end = pos + header, pos + size
                    continue
        if pos + size < end and data[pos + size] == lead and lead in _FIXED:  # a run of them
            stop = _run(data, pos, end, lead, size)  # past this item at least
            n += (stop - pos) // size - 1
            if n > limit:
                return n
            pos = stop
            continue
        if pos + size > end:  # a length running past its extension (or the data)
            n += end - pos
            if n > limit:
                return n
            size = end - pos
        pos += size


def compressible(packed: bytes, limit: int) -> bool:
    """Whether the writer may compress ``packed`` msgpack: at most ``limit``
    bytes, so it holds at most ``limit`` items and a reader with the same bound
    accepts it without counting. A larger value is stored as it is (its size
    bounds what it decodes to), never counted: see the module doc."""
    return len(packed) <= limit


def check_items(inflated: bytes, stored: int, limit: int) -> None:
    """Refuse a compressed value (``stored`` bytes) whose ``inflated`` msgpack
    holds more than ``limit`` items (see the module doc)."""
    if len(inflated) <= limit or count_items(inflated, limit) <= limit:
        return
    raise CorruptBlobError(
        f"compressed value ({stored} bytes, inflating to {len(inflated)}) decodes to more"
        f" than {limit} msgpack items; refused as a decompression bomb. If it is"
        " legitimate (an earlier threadloom compressed values of any item count; it now"
        " stores such a value uncompressed), read it with a"
        " serializer built with a larger max_decoded_items= (MsgpackSerializer /"
        " JsonPlusSerializer), e.g. MsgpackSerializer(max_decoded_items=1 << 28)"
    )

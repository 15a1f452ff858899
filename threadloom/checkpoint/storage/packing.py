"""Compact, exact forms of channel versions and timestamps (checkpoint records).

Standard versions (``next_version``: ``"<32-digit counter>.0.<digits>"``) pack
as ``(counter, int(digits))`` (``(counter, int(digits), len)`` when the digits
start with a zero), parsed without float formatting and no bigger than a
float; other ``"<counter>.<float>"`` versions as ``(counter, float)`` when that
re-formats identically and is not integral (so it never equals an int form); ``ts`` as integer microseconds when that re-formats to the
identical string. Anything else is kept as is. All memoized: the same values
recur in every checkpoint's versions_seen and every read.

A checkpoint's ``ts`` and its uuid6 id are taken at the same moment, so a
record stores ``ts`` as a :class:`TsDelta` (:func:`pack_ts_for`): microseconds
from the id's own timestamp, a msgpack ext (type :data:`TS_EXT`, 3 bytes
instead of 9). Ext is a type no older record holds (int micros, str), so the
forms cannot be confused; the delta is only taken when the int form already
round-trips, and a reader adds it back to the id the row is stored under
(records keep their ids: copy_thread re-keys threads, never checkpoints).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import ormsgpack

from threadloom.checkpoint import ids as _ids
from threadloom.checkpoint.ids import MADE

__all__ = [
    "TS_EXT",
    "TsDelta",
    "ext_hook",
    "pack_ts",
    "pack_ts_for",
    "pack_version",
    "packed_get",
    "unpack_ts",
    "unpack_ts_for",
    "unpack_version",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)

_PACKED: dict[str, Any] = {}
_made_pop = MADE.pop  # versions ids.next_version made, already split (see ids.MADE)
packed_get = _PACKED.get
"""A memo hit without a call (``packed_get(v) or pack_version(v)``): cleared,
never replaced, so the bound method stays valid."""


def pack_version(version: Any) -> Any:
    """The packed form of a version (see the module doc), memoized."""
    if type(version) is str:
        packed = _PACKED.get(version)
        if packed is None:
            if len(_PACKED) > 65536:
                _PACKED.clear()
            packed = _made_pop(version, None) or _pack_version(version)
            _PACKED[version] = packed
        return packed
    return version


def _pack_version(version: Any) -> Any:
    """See the module doc; exact by construction, else the version itself."""
    if type(version) is str and len(version) > 33 and version[32] == ".":
        head, tail = version[:32], version[33:]
        if head.isascii() and head.isdigit() and (counter := int(head)) < _MAX_INT:
            digits = tail[2:]
            if tail[:2] == "0." and 0 < len(digits) < 20 and digits.isascii() and digits.isdigit():
                if digits[0] == "0":
                    return (counter, int(digits), len(digits))
                return (counter, int(digits))
            try:
                rnd = float(tail)
            except ValueError:
                return version
            if f"{rnd:016}" == tail and not rnd.is_integer():
                return (counter, rnd)
    return version


_MAX_INT = 1 << 63
_UNPACKED: dict[tuple[Any, ...], str] = {}


def unpack_version(packed: Any) -> Any:
    if type(packed) is tuple:
        text = _UNPACKED.get(packed)
        if text is None:
            if len(_UNPACKED) > 65536:
                _UNPACKED.clear()
            if len(packed) == 3:
                text = f"{packed[0]:032}.0.{packed[1]:0{packed[2]}}"
            elif type(packed[1]) is int:
                text = f"{packed[0]:032}.0.{packed[1]}"
            else:
                text = f"{packed[0]:032}.{packed[1]:016}"
            _UNPACKED[packed] = text
        return text
    return packed


def pack_ts(ts: Any) -> Any:
    """Integer microseconds when that re-formats to the identical string.

    The common form (``YYYY-MM-DDTHH:MM:SS.ffffff+00:00``, non-zero micros)
    costs a dict lookup: the epoch offset of each whole second seen is
    memoized (checkpoints come many per second). Anything else goes through
    ``datetime`` and is packed only if it round-trips exactly.
    """
    if type(ts) is not str:
        return ts
    if len(ts) == 32 and ts[19] == "." and ts[26:] == "+00:00":
        base = _SECONDS.get(ts[:19])
        frac = ts[20:26]
        if base is not None and frac.isascii() and frac.isdigit() and frac != "000000":
            return base + int(frac)
    if ts.endswith("+00:00"):
        try:
            dt = datetime.fromisoformat(ts)
        except ValueError:
            return ts
        if dt.isoformat() == ts and dt.tzinfo == timezone.utc:
            micros = (dt - _EPOCH) // _MICROSECOND
            if len(ts) == 32 and micros % 1_000_000:  # the memoizable form
                if len(_SECONDS) > 65536:
                    _SECONDS.clear()
                _SECONDS[ts[:19]] = micros - micros % 1_000_000
            return micros
    return ts


def unpack_ts(packed: Any) -> Any:
    if type(packed) is int:
        seconds, micros = divmod(packed, 1_000_000)
        prefix = _SECOND_TEXT.get(seconds)
        if prefix is None:
            text = (_EPOCH + timedelta(microseconds=packed)).isoformat()
            if len(text) != 32 or not micros:
                return text
            if len(_SECOND_TEXT) > 65536:
                _SECOND_TEXT.clear()
            prefix = _SECOND_TEXT[seconds] = text[:19]
        if micros:
            return f"{prefix}.{micros:06}+00:00"
        return f"{prefix}+00:00"
    return packed


_SECONDS: dict[str, int] = {}  # "YYYY-MM-DDTHH:MM:SS" -> epoch microseconds
_SECOND_TEXT: dict[int, str] = {}  # seconds since the epoch -> "YYYY-MM-DDTHH:MM:SS"


TS_EXT = 1  # msgpack ext type of a TsDelta. Never reuse for anything else
_GREGORIAN_OFFSET = 0x01B21DD213814000  # 100 ns ticks from 1582-10-15 to 1970-01-01
_DELTA_BYTES = ((1 << 15, 2), (1 << 31, 4))  # |delta| bound -> fixext size (1 byte: _SMALL)
_SMALL = [ormsgpack.Ext(TS_EXT, d.to_bytes(1, "big", signed=True)) for d in range(-128, 128)]


class TsDelta:
    """A stored ``ts``: microseconds from the checkpoint id's timestamp."""

    __slots__ = ("delta",)

    def __init__(self, delta: int) -> None:
        self.delta = delta

    def __eq__(self, other: object) -> bool:
        return type(other) is TsDelta and other.delta == self.delta

    def __hash__(self) -> int:
        return hash((TsDelta, self.delta))

    def __repr__(self) -> str:
        return f"TsDelta({self.delta})"

    def ext(self) -> ormsgpack.Ext:
        """The msgpack form: the delta as a big-endian signed 1-, 2- or 4-byte int."""
        delta = self.delta
        if -128 <= delta < 128:
            return _SMALL[delta + 128]
        for bound, size in _DELTA_BYTES:
            if -bound <= delta < bound:
                return ormsgpack.Ext(TS_EXT, delta.to_bytes(size, "big", signed=True))
        raise ValueError(f"ts delta {delta} does not fit 4 bytes")


_DELTAS = [TsDelta(d) for d in range(-128, 128)]  # shared: a TsDelta is never changed


def ext_hook(code: int, data: bytes) -> Any:
    """``ormsgpack.unpackb``'s ext hook for records: only :data:`TS_EXT` exists."""
    if code == TS_EXT and len(data) in (1, 2, 4):
        return TsDelta(int.from_bytes(data, "big", signed=True))
    raise ValueError(f"unknown msgpack ext type {code} in a checkpoint record")


def id_micros(checkpoint_id: Any) -> int | None:
    """The timestamp of a uuid6-shaped id in epoch microseconds (floored), else
    None. Only ever compared with the same id string, so exactness needs this
    to be deterministic, not the id to be a real uuid6."""
    if type(checkpoint_id) is not str or len(checkpoint_id) != 36 or checkpoint_id[14] != "6":
        return None
    try:  # time_high, time_mid, "6", time_low
        bits = int(checkpoint_id[:18].replace("-", ""), 16)
    except ValueError:
        return None
    return (((bits >> 16) << 12 | (bits & 0xFFF)) - _GREGORIAN_OFFSET) // 10


def pack_ts_for(ts: Any, checkpoint_id: Any) -> Any:
    """``ts`` as stored in the record of ``checkpoint_id``: a :class:`TsDelta`
    when the int form round-trips and the id's timestamp is within ~35 minutes,
    else :func:`pack_ts`'s form. The ``ts`` and id this process made last (the
    usual put) are not parsed back (``ids.LAST_TS``/``ids.LAST_ID``)."""
    last_ts = _ids.LAST_TS
    if (
        type(ts) is str and ts == last_ts[0]
    ):  # equal strings: now_iso's numbers are what pack_ts parses
        packed = last_ts[1] * 1_000_000 + last_ts[2]
    else:
        packed = pack_ts(ts)
    if type(packed) is int:
        last_id = _ids.LAST_ID
        if type(checkpoint_id) is str and checkpoint_id == last_id[0]:
            base = (last_id[1] - _GREGORIAN_OFFSET) // 10  # what id_micros parses
        else:
            base = id_micros(checkpoint_id)
        if base is not None and -(1 << 31) <= packed - base < 1 << 31:
            delta = packed - base
            return _DELTAS[delta + 128] if -128 <= delta < 128 else TsDelta(delta)
    return packed


def unpack_ts_for(packed: Any, checkpoint_id: Any) -> Any:
    """The ``ts`` string of a record stored under ``checkpoint_id``."""
    if type(packed) is TsDelta:
        base = id_micros(checkpoint_id)
        if base is None:
            raise ValueError(f"ts stored as a delta but {checkpoint_id!r} has no timestamp")
        return unpack_ts(base + packed.delta)
    return unpack_ts(packed)

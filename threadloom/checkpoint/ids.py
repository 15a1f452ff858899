"""Checkpoint ids and channel versions.

Checkpoint ids are UUIDv6 strings: the 60-bit timestamp comes first, so sorting
the strings sorts by creation time, and the 14-bit clock sequence carries the step
(``-2`` -> ``bffe``, ``-1`` -> ``bfff``, ``0`` -> ``8000``). Savers pick the latest
checkpoint with ``max(id)`` and page with ``id < before``.

Channel versions are strings ``"<n:032>.<random>"``: the counter orders them, the
random tail keeps two forks that reach the same counter distinct.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from datetime import datetime, timezone

__all__ = ["uuid6", "uuid6_str", "now_iso", "next_version", "version_counter"]

_GREGORIAN_OFFSET = 0x01B21DD213814000  # 100 ns ticks from 1582-10-15 to 1970-01-01
_lock = threading.Lock()
_last_ticks = 0


def _ticks() -> int:
    """100 ns ticks since the Gregorian epoch, strictly increasing in this process."""
    global _last_ticks
    now = time.time_ns() // 100 + _GREGORIAN_OFFSET
    with _lock:
        if now <= _last_ticks:
            now = _last_ticks + 1
        _last_ticks = now
    return now


def uuid6(clock_seq: int | None = None) -> uuid.UUID:
    """A time-ordered UUIDv6; ``clock_seq`` (the step) fills the clock-sequence field."""
    return uuid.UUID(int=_uuid6_int(clock_seq))


_head: tuple[int, str] = (-1, "")  # (ticks >> 12, the id's first 15 characters): swapped whole


def uuid6_str(clock_seq: int | None = None) -> str:
    """``str(uuid6(clock_seq))`` without building a ``UUID`` object or the 128-bit
    int: every saved checkpoint needs one. Its timestamp (100 ns ticks) is
    left in :data:`LAST_ID` for the storage core, which stores the checkpoint's
    ``ts`` relative to it."""
    global _last_ticks, _head, LAST_ID
    ticks = time.time_ns() // 100 + _GREGORIAN_OFFSET
    with _lock:  # _ticks() inlined: strictly increasing in this process
        if ticks <= _last_ticks:
            ticks = _last_ticks + 1
        _last_ticks = ticks
    if clock_seq is None:
        clock_seq = random.getrandbits(14)
    high = ticks >> 12  # time_high + time_mid: the same for ~410 us
    last_high, head = _head
    if high != last_high:
        head = f"{high >> 16:08x}-{high & 0xFFFF:04x}-6"
        _head = (high, head)
    text = (
        f"{head}{ticks & 0xFFF:03x}-{0x8000 | (clock_seq & 0x3FFF):04x}-"
        f"{random.getrandbits(48):012x}"
    )
    LAST_ID = (text, ticks)
    return text


_ts: tuple[int, str] = (-1, "")  # (second, its "YYYY-MM-DDTHH:MM:SS"): one tuple, swapped whole


def now_iso() -> str:
    """``datetime.now(timezone.utc).isoformat()``, formatting the date part once per
    second (checkpoint timestamps are taken every step)."""
    global _ts, LAST_TS
    second, micros = divmod(time.time_ns() // 1000, 1_000_000)
    cached_second, prefix = _ts
    if second != cached_second:
        prefix = datetime.fromtimestamp(second, timezone.utc).isoformat()[:19]
        _ts = (second, prefix)
    text = f"{prefix}.{micros:06d}+00:00" if micros else prefix + "+00:00"
    LAST_TS = (text, second, micros)
    return text


def _uuid6_int(clock_seq: int | None) -> int:
    ticks = _ticks()
    if clock_seq is None:
        clock_seq = random.getrandbits(14)
    node = random.getrandbits(48)
    value = (ticks >> 12) << 80  # time_high + time_mid (48 bits)
    value |= 0x6 << 76  # version 6
    value |= (ticks & 0x0FFF) << 64  # time_low (12 bits)
    value |= 0x2 << 62  # RFC 4122 variant
    value |= (clock_seq & 0x3FFF) << 48
    value |= node
    return value


def version_counter(version: str | int | float | None) -> int:
    """The monotonic part of a channel version (``None`` -> 0)."""
    if version is None:
        return 0
    if isinstance(version, (int, float)):
        return int(version)
    return int(version.split(".", 1)[0])


def next_version(current: str | int | float | None, channel: object = None) -> str:
    """The version that follows ``current``, as LangGraph's string savers format it.

    ``channel`` is ignored: it makes this usable where ``get_next_version(current,
    channel)`` is expected (the runtime calls it directly when a saver keeps the default).
    """
    if type(current) is str and current[32:33] == ".":  # the usual case: one of ours
        following = _FOLLOWING.get(current[:32])
        if following is None:
            following = _following(current)
        counter, head = following
    else:
        counter = version_counter(current) + 1
        head = f"{counter:032}."
    # repr(x).zfill(16) == f"{x:016}" for x in [0, 1) (LangGraph's format), formatted faster
    tail = repr(random.random())
    if len(tail) < 16:
        return head + tail.zfill(16)
    text = head + tail
    # repr of [1e-4, 1) is "0." + at most 17 significant digits; of smaller
    # floats, an exponent form starting with 1-9
    if tail[0] == "0" and tail[2] != "0" and counter < _MAX_PARTS:
        if len(MADE) > 4096:
            MADE.clear()
        MADE[text] = (counter, int(tail[2:]))
    return text


def _following(current: str) -> tuple[int, str]:
    """The counter after ``current``'s and its text up to the dot, memoized by
    ``current``'s counter text (the same counters recur in every thread)."""
    text = current[:32]
    if not text.isdigit():
        counter = version_counter(current) + 1
        return counter, f"{counter:032}."
    counter = int(text) + 1  # parsed without split()
    following = (counter, f"{counter:032}.")
    if len(_FOLLOWING) > 4096:
        _FOLLOWING.clear()
    _FOLLOWING[text] = following
    return following


_FOLLOWING: dict[str, tuple[int, str]] = {}
_MAX_PARTS = 1 << 63
MADE: dict[str, tuple[int, int]] = {}
"""Versions :func:`next_version` made (``"<counter>.0.<digits>"``, the digits
not starting with 0) -> ``(counter, int(digits))``, bounded. The storage core
packs every version it stores as exactly these two numbers
(``storage.packing``); handing them over spares parsing back the text that
was formatted a moment before (every changed channel of every put)."""

LAST_ID: tuple[str | None, int] = (None, 0)
"""The last checkpoint id :func:`uuid6_str` made and its 100 ns ticks;
:data:`LAST_TS` the last timestamp :func:`now_iso` made, its second and
microseconds (one tuple each, swapped whole). A record stores a checkpoint's
``ts`` as microseconds from its id's time (``storage.packing.pack_ts_for``):
when the put's ``ts`` and id are these (the runtime makes both just before it
saves), neither string is parsed back. A slot only matches its own string and
holds what parsing that string gives, so a miss (another thread, another
checkpoint) just parses."""
LAST_TS: tuple[str | None, int, int] = (None, 0, 0)

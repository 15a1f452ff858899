"""Checkpoint records: keyframes and diffs along the parent chain.

A checkpoint row's ``data`` is msgpack (tag ``"tl1"``): ``[mask, field, ...]``
(:data:`_SLOTS`; older records, a map, read the same) of these fields:

* ``k``: depth, 0 for a keyframe, else the distance to the nearest keyframe
  ancestor (a reader fetches at most ``k`` ancestors, in one query);
* ``b``: the small fields every checkpoint has (``v``, ``ts``,
  ``updated_channels``), ``x``: any other checkpoint key, through the serializer;
* ``cv``/``vs``/``iv``: channel versions, versions_seen and the *inline* channel
  values (``[tag, bytes]`` as produced by the serializer, small ones only; the
  usual tags as a small int, :mod:`.tags`). A keyframe holds them whole; a
  diff holds what changed since the parent plus ``cx``/``vx``/``ix``, the keys
  that disappeared.

Versions and ``ts`` are stored packed (:mod:`.packing`: exact, compact; ``ts``
as a delta from the record's checkpoint id when it is a uuid6, so a record
decodes against the id it is stored under: :func:`to_checkpoint`).
A 4-checkpoints-per-turn agent then writes ~150 bytes per checkpoint instead of
the whole state, and every version of a small channel costs no extra row.

This module is the byte layout; the name/version tables its indices point
into are :mod:`.tables`, the state a chain of records rebuilds :mod:`.state`
(re-exported here: callers, and tests that patch them, use ``record.<name>``).
"""

from __future__ import annotations

from typing import Any

import ormsgpack

from threadloom.checkpoint.storage.packing import (
    TsDelta,
    ext_hook,
    pack_ts,
    pack_version,
    unpack_ts,
    unpack_ts_for,
    unpack_version,
)
from threadloom.checkpoint.storage.state import (
    Changes,
    State,
    core_fields,
    diff,
    pack_state,
    raw_versions,
    ref_keys,
    to_checkpoint,
)
from threadloom.checkpoint.storage.tables import fill_tables, open_tables
from threadloom.checkpoint.storage.tags import TAG_CODES, TAG_NAMES

__all__ = [
    "RECORD_TAG",
    "State",
    "apply",
    "core_fields",
    "decode",
    "encode",
    "pack_state",
    "pack_ts",
    "pack_version",
    "raw_versions",
    "ref_keys",
    "to_checkpoint",
    "unpack_ts",
    "unpack_ts_for",
    "unpack_version",
]

RECORD_TAG = "tl1"
_TAG_NAMES = TAG_NAMES  # inline values' usual tags as small ints (one table: .tags)

# [mask, field, ...]: bit i of the mask says _SLOTS[i] follows. Never reorder
_SLOTS = ("k", "v", "ts", "cv", "u", "t", "vs", "iv", "ix", "n", "cx", "vx", "U", "x")
_SLOT_BITS = tuple((1 << i, key) for i, key in enumerate(_SLOTS))
_MASK_KEYS: dict[int, tuple[str, ...]] = {}  # mask -> its keys (a handful recur)
_KEPT = (None, None, None)  # no name removed from cv, vs or iv (encode's ``gone``)


def encode(
    core: dict[str, Any],
    extra: Any,
    state: State,
    prev: State | None,
    changes: Changes | None = None,
    iv_changes: tuple[dict[str, Any], list[str]] | None = None,
) -> bytes:
    """The record of ``state``: a keyframe when ``prev`` is None, else a diff.

    Names and versions are written once per keyframe interval (``n``/``t`` hold
    only what this record adds); maps become flat ``[name, value, ...]`` lists;
    an inline value written at the version this record sets omits it. Fills
    ``state.names``/``state.versions``/``state.index``. ``changes`` (from
    :func:`pack_state`) spares comparing versions with the parent's again,
    ``iv_changes`` (changed inline values, removed ones) comparing the values.
    """
    ni, nref, vref, pairs, new_names, new_versions, _, _ = tables = open_tables(prev)
    if prev is None:
        for name in state.names:  # a re-written keyframe keeps its tables: children
            nref(name)  # index into them
        for version in state.versions:
            vref(version)
        cv, vs, iv, cx, vx, ix = state.cv, state.vs, state.iv, (), (), ()
    else:
        if changes is not None:
            cv, cx, vs, vx = changes
        else:
            cv, cx = diff(state.cv, prev.cv)
            vs, vx = diff(state.vs, prev.vs)
        iv, ix = iv_changes if iv_changes is not None else diff(state.iv, prev.iv)
    # hits in the parent's tables are looked up inline (no call): the common case
    gone: Any = _KEPT
    if cx or vx or ix:
        gone = [[ni[c] if c in ni else nref(c) for c in g] if g else None for g in (cx, vx, ix)]
    rcv = pairs(cv) if cv else None
    rvs = None
    if vs:
        rvs = []
        for n, seen in vs.items():
            rvs.append(ni[n] if n in ni else nref(n))
            rvs.append(pairs(seen))
    riv = None
    if iv:  # inline values [name, tag, bytes] (+ version, unless cv sets it)
        tc, riv = TAG_CODES, []
        for c, e in iv.items():
            i = ni[c] if c in ni else nref(c)
            if c in cv and e[0] == cv[c]:
                riv.append([i, tc.get(e[1], e[1]), e[2]])
            else:
                riv.append([i, tc.get(e[1], e[1]), e[2], vref(e[0])])
    uc = core.get("updated_channels")
    ru = None
    if type(uc) is list:
        for c in uc:
            if type(c) is not str:
                break
        else:  # names only (the usual case): as indices
            ru = [ni[c] if c in ni else nref(c) for c in uc]
    out = _slots(state.depth, core, extra, rcv, ru, new_versions, rvs, riv, gone, new_names)
    fill_tables(state, prev, tables)
    return ormsgpack.packb(out)


def _slots(
    depth: int, core: dict[str, Any], extra: Any, rcv: Any, ru: Any, new_versions: list[Any],
    rvs: Any, riv: Any, gone: Any, new_names: list[Any],
) -> list[Any]:  # fmt: skip
    """``[mask, k, v, ts, cv, u, t, vs, iv, ix, n, cx, vx, U, x]``, bit i of the
    mask saying :data:`_SLOTS` ``[i]`` follows; the slots most diffs carry are
    tested one by one (no loop), the rare ones only when some is present."""
    ts = core.get("ts")
    out: list[Any] = [0, depth, core.get("v", 1), ts.ext() if type(ts) is TsDelta else ts]
    mask = 7  # k, v, ts: always written
    if rcv is not None:
        mask |= 8
        out.append(rcv)
    if ru is not None:
        mask |= 16
        out.append(ru)
    if new_versions:
        mask |= 32
        out.append(new_versions)
    if rvs is not None:
        mask |= 64
        out.append(rvs)
    if riv is not None:
        mask |= 128
        out.append(riv)
    if gone is not _KEPT or new_names:
        bit = 256
        for value in (gone[2], new_names or None, gone[0], gone[1]):
            if value is not None:
                mask |= bit
                out.append(value)
            bit <<= 1
    if ru is None and "updated_channels" in core:
        mask |= 4096
        out.append(core["updated_channels"])
    if extra:
        mask |= 8192
        out.append(extra)
    out[0] = mask
    return out


def decode(data: bytes) -> dict[str, Any]:
    """The raw record (indices unresolved: :func:`apply` needs the base state)."""
    raw = ormsgpack.unpackb(data, ext_hook=ext_hook)
    if type(raw) is not list or not raw or type(raw[0]) is not int:
        return raw  # a map: written before the slot layout (or not a record)
    keys = _MASK_KEYS.get(raw[0])
    if keys is None:
        keys = tuple(key for bit, key in _SLOT_BITS if raw[0] & bit)
        if len(_MASK_KEYS) < 4096:
            _MASK_KEYS[raw[0]] = keys
    return dict(zip(keys, raw[1:]))


def _pairs(flat: list[Any]) -> list[tuple[Any, Any]]:
    return list(zip(flat[::2], flat[1::2]))


def apply(rec: dict[str, Any], prev: State | None) -> tuple[State, dict[str, Any], Any]:
    """``(state, core fields, extra)`` of a raw record; ``prev`` = the parent's
    state (ignored for keyframes, required for diffs)."""
    base = prev if rec["k"] != 0 else None
    if rec["k"] != 0 and base is None:
        raise ValueError("a diff record needs its parent's state")
    _check(rec)
    n = (base.names if base else []) + rec.get("n", [])
    t = (base.versions if base else []) + [
        tuple(v) if type(v) is list else v for v in rec.get("t", ())
    ]
    cv_part = {n[c]: t[v] for c, v in _pairs(rec.get("cv", []))}
    vs_part = {n[k]: {n[c]: t[v] for c, v in _pairs(seen)} for k, seen in _pairs(rec.get("vs", []))}
    tags = _TAG_NAMES
    iv_part = {
        n[e[0]]: [
            cv_part[n[e[0]]] if len(e) == 3 else t[e[3]],
            tags[e[1]] if type(e[1]) is int else e[1],
            e[2],
        ]
        for e in rec.get("iv", [])
    }
    if base is None:
        cv, vs, iv = cv_part, vs_part, iv_part
    else:
        cv, vs, iv = {**base.cv, **cv_part}, {**base.vs, **vs_part}, {**base.iv, **iv_part}
        for key, target in (("cx", cv), ("vx", vs), ("ix", iv)):
            for i in rec.get(key, ()):
                target.pop(n[i], None)
    core: dict[str, Any] = {"v": rec.get("v", 1)}
    if rec.get("ts") is not None:
        core["ts"] = rec["ts"]
    if "u" in rec:
        core["updated_channels"] = [n[i] for i in rec["u"]]
    elif "U" in rec:
        core["updated_channels"] = rec["U"]
    return State(cv, vs, iv, rec["k"], n, t), core, rec.get("x")


_NAME_TYPES = (str, int)
_SCALAR_VERSIONS = (str, int, float)


def _check(rec: dict[str, Any]) -> None:
    """Refuse a record whose parts have another shape than :func:`encode`
    writes (ValueError, which the reader reports as a corrupt checkpoint):
    else a wrong type would fail much later, far from the row (unhashable
    names, versions that cannot be formatted, values without bytes). Only
    what this record adds is checked; its ancestors were checked when read."""
    for name in rec.get("n", ()):
        if type(name) not in _NAME_TYPES:
            raise ValueError(f"channel name {name!r} is not a str")
    for version in rec.get("t", ()):
        if not _version_ok(version):
            raise ValueError(f"channel version {version!r} is not one threadloom writes")
    for key in ("cv", "vs"):
        if len(rec.get(key, ())) % 2:
            raise ValueError(f"{key!r} is not a list of pairs")
    for e in rec.get("iv", ()):
        if type(e) is not list or len(e) not in (3, 4) or type(e[2]) is not bytes:
            raise ValueError(f"inline value {e!r:.60} is not [name, tag, bytes(, version)]")
        if type(e[1]) is not int and type(e[1]) is not str:
            raise ValueError(f"inline value tag {e[1]!r} is not one threadloom writes")
    ts = rec.get("ts")
    if ts is not None and type(ts) not in (str, int, TsDelta):
        raise ValueError(f"ts {ts!r} is not one threadloom writes")
    if type(rec.get("v", 1)) is not int:
        raise ValueError(f"checkpoint format version {rec['v']!r} is not an int")


def _version_ok(version: Any) -> bool:
    kind = type(version)
    if kind in _SCALAR_VERSIONS:
        return True
    if kind is not list and kind is not tuple:
        return False
    if len(version) == 2:  # (counter, digits) or (counter, float)
        return type(version[0]) is int and type(version[1]) in (int, float)
    return len(version) == 3 and all(type(x) is int for x in version)  # + digit count

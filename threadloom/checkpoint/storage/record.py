"""Checkpoint records: keyframes and diffs along the parent chain.

A checkpoint row's ``data`` is msgpack (tag ``"tl1"``): ``[mask, field, ...]``
(:data:`_SLOTS`; older records, a map, read the same) of these fields:

* ``k``: depth, 0 for a keyframe, else the distance to the nearest keyframe
  ancestor (a reader fetches at most ``k`` ancestors, in one query);
* ``b``: the small fields every checkpoint has (``v``, ``ts``,
  ``updated_channels``), ``x``: any other checkpoint key, through the serializer;
* ``cv``/``vs``/``iv``: channel versions, versions_seen and the *inline* channel
  values (``[tag, bytes]`` as produced by the serializer, small ones only; the
  usual tags as a small int, :data:`_TAG_NAMES`). A
  keyframe holds them whole; a diff holds what changed since the parent plus
  ``cx``/``vx``/``ix``, the keys that disappeared.

Versions and ``ts`` are stored packed (:mod:`.packing`: exact, compact; ``ts``
as a delta from the record's checkpoint id when it is a uuid6, so a record
decodes against the id it is stored under: :func:`to_checkpoint`).
A 4-checkpoints-per-turn agent then writes ~150 bytes per checkpoint instead of
the whole state, and every version of a small channel costs no extra row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ormsgpack

from threadloom.checkpoint.storage.packing import (
    TsDelta,
    ext_hook,
    pack_ts,
    pack_ts_for,
    pack_version,
    packed_get,
    unpack_ts,
    unpack_ts_for,
    unpack_version,
)
from threadloom.checkpoint.storage.rows import version_key

__all__ = [
    "RECORD_TAG",
    "State",
    "apply",
    "core_fields",
    "decode",
    "encode",
    "pack_ts",
    "pack_version",
    "raw_versions",
    "ref_keys",
    "to_checkpoint",
    "unpack_ts",
    "unpack_version",
]

RECORD_TAG = "tl1"
# inline values' usual serializer tags as small ints (others as text). Never renumber
_TAG_NAMES = ("msgpack", "null", "bytes", "msgpack+zstd", "empty")
_TAG_CODES = {tag: i for i, tag in enumerate(_TAG_NAMES)}
# [mask, field, ...]: bit i of the mask says _SLOTS[i] follows. Never reorder
_SLOTS = ("k", "v", "ts", "cv", "u", "t", "vs", "iv", "ix", "n", "cx", "vx", "U", "x")
_SLOT_BITS = tuple((1 << i, key) for i, key in enumerate(_SLOTS))
_MASK_KEYS: dict[int, tuple[str, ...]] = {}  # mask -> its keys (a handful recur)
_CORE = ("v", "ts", "updated_channels")
_NOT_EXTRA = frozenset({"id", "channel_values", "channel_versions", "versions_seen", *_CORE})


@dataclass(slots=True)
class State:
    """A checkpoint rebuilt from its records (versions packed, values serialized).

    ``names``/``versions`` are the lookup tables in force after this record: a
    keyframe starts them, each diff appends what it introduces, so diffs refer
    to channel names and versions their ancestors already wrote by index.
    """

    cv: dict[str, Any]
    vs: dict[str, dict[str, Any]]
    iv: dict[str, list[Any]]
    depth: int
    names: list[Any] = field(default_factory=list)
    versions: list[Any] = field(default_factory=list)
    index: tuple[dict[Any, int], dict[Any, int]] | None = None  # lookups for the tables
    raw: tuple[dict[str, Any], dict[str, dict[str, Any]]] | None = None  # versions as given
    # what a reader needs besides the tables, kept with a cached state so a
    # re-read of the same record (``data`` equal) skips decoding it again:
    data: bytes | None = None
    core: dict[str, Any] | None = None
    extra: Any = None
    keys: dict[str, str] | None = None  # channel -> version key, for ref'd values


def raw_versions(state: State) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``state``'s versions unpacked (computed once per state; never mutate)."""
    raw = state.raw
    if raw is None:
        raw = state.raw = (
            {c: unpack_version(v) for c, v in state.cv.items()},
            {n: {c: unpack_version(v) for c, v in seen.items()} for n, seen in state.vs.items()},
        )
    return raw


def ref_keys(state: State) -> dict[str, str]:
    """Version keys of the channels whose value is not inline in the record
    (what a reader looks up in refs), computed once per state."""
    keys = state.keys
    if keys is None:
        keys, iv = {}, state.iv
        for channel, version in state.cv.items():
            inline = iv.get(channel)
            if inline is None or inline[0] != version:
                keys[channel] = version_key(unpack_version(version))
        state.keys = keys
    return keys


def _diff(new: dict[str, Any], old: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    missing = _MISSING
    changed = {}
    for k, v in new.items():
        o = old.get(k, missing)
        if o is not v and (o is missing or o != v):
            changed[k] = v
    return changed, [k for k in old if k not in new] if len(old) > len(new) - len(changed) else []


_MISSING: Any = object()
_KEPT = (None, None, None)  # no name removed from cv, vs or iv (encode's ``gone``)
Changes = tuple[dict[str, Any], list[str], dict[str, Any], list[str]]


def pack_state(
    raw_cv: dict[str, Any], raw_vs: dict[str, dict[str, Any]], prev: State | None
) -> tuple[dict[str, Any], dict[str, dict[str, Any]], Any, Changes | None]:
    """``(cv, vs, raw, changes)``: packed channel versions and versions_seen,
    copies of the versions as given, and what changed since ``prev``.

    The given versions are compared with the parent's as given (the runtime
    passes the same string objects again, so these are mostly identity
    checks) and only changed entries are packed; unchanged ones reuse the
    parent's packed objects.
    """
    if prev is None:
        cv = {c: pack_version(v) for c, v in raw_cv.items()}
        vs = {n: {c: pack_version(v) for c, v in seen.items()} for n, seen in raw_vs.items()}
        return cv, vs, (dict(raw_cv), {n: dict(seen) for n, seen in raw_vs.items()}), None
    old_cv, old_vs = raw_versions(prev)
    known = packed_get
    pcv, pvs, missing = prev.cv, prev.vs, _MISSING
    cv, cv_new, added = {}, {}, 0  # added: keys the parent lacks (so none was removed
    for c, v in raw_cv.items():  # when the others are as many as the parent's keys)
        o = old_cv.get(c, missing)
        if o is v or (type(o) is type(v) and o == v):
            cv[c] = pcv[c]
        else:
            cv[c] = cv_new[c] = pack_version(v)
            added += o is missing
    cx = [c for c in pcv if c not in cv] if len(pcv) > len(cv) - added else []
    vs, vs_new, rvs, added = {}, {}, {}, 0
    for n, seen in raw_vs.items():
        o = old_vs.get(n)
        if o is not None and o == seen:
            vs[n], rvs[n] = pvs[n], o
        else:  # mostly versions cv just packed: memo hits, looked up inline
            vs[n] = vs_new[n] = {c: known(v) or pack_version(v) for c, v in seen.items()}
            rvs[n] = dict(seen)
            added += o is None
    vx = [n for n in pvs if n not in vs] if len(pvs) > len(vs) - added else []
    return cv, vs, (dict(raw_cv), rvs), (cv_new, cx, vs_new, vx)


def _key(value: Any) -> Any:
    """Table key: packed versions are tuples; anything else keeps its type (1 != 1.0)."""
    kind = type(value)
    if kind is tuple:
        return value
    return tuple(value) if kind is list else (kind.__name__, value)


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
    ni, nref, vref, pairs, new_names, new_versions, _, _ = tables = _tables(prev)
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
            cv, cx = _diff(state.cv, prev.cv)
            vs, vx = _diff(state.vs, prev.vs)
        iv, ix = iv_changes if iv_changes is not None else _diff(state.iv, prev.iv)
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
        tc, riv = _TAG_CODES, []
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
    _fill(state, prev, tables)
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


def _tables(prev: State | None) -> tuple[Any, ...]:
    """Names and versions of a chain of records (each use is a small int index):
    ``nref``/``vref`` give the index of a name/version, appending it to ``new_*``
    when the parent's table lacks it. The parent's tables are never mutated:
    added names go to a side index (rare), versions (nearly every record adds
    some) into a copy of the parent's index, which inline lookups then see."""
    if prev is None:
        ni, vi, nstart, vstart = {}, {}, 0, 0
    else:
        nstart, vstart = len(prev.names), len(prev.versions)
        if prev.index is None:
            ni = {v: i for i, v in enumerate(prev.names)}
            vi = {_key(v): i for i, v in enumerate(prev.versions)}
        else:
            ni, vi = prev.index[0], dict(prev.index[1])
    new_names: list[Any] = []
    new_versions: list[Any] = []
    nadd: dict[Any, int] = {}

    def nref(name: Any) -> int:
        i = ni.get(name)
        if i is None:
            i = nadd.get(name)
            if i is None:
                i = nadd[name] = nstart + len(new_names)
                new_names.append(name)
        return i

    def vref(value: Any) -> int:
        key = value if type(value) is tuple else _key(value)
        i = vi.get(key)
        if i is None:
            i = vi[key] = vstart + len(new_versions)
            new_versions.append(value)
        return i

    def pairs(versions: dict[str, Any]) -> list[int]:
        """``{name: version}`` as ``[name index, version index, ...]`` (vref inline)."""
        out: list[int] = []
        app, get = out.append, vi.get
        for c, v in versions.items():
            app(ni[c] if c in ni else nref(c))
            key = v if type(v) is tuple else _key(v)
            i = get(key)
            if i is None:
                i = vi[key] = vstart + len(new_versions)
                new_versions.append(v)
            app(i)
        return out

    return ni, nref, vref, pairs, new_names, new_versions, nadd, vi


def _fill(state: State, prev: State | None, tables: tuple[Any, ...]) -> None:
    """The tables in force after ``state``'s record, for its children."""
    ni, _, _, _, new_names, new_versions, nadd, vi = tables
    names, versions = (prev.names, prev.versions) if prev is not None else ([], [])
    if new_names:
        names = names + new_names
        ni = {**ni, **nadd}
    if new_versions:
        versions = versions + new_versions
    state.names, state.versions, state.index = names, versions, (ni, vi)


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


def core_fields(checkpoint: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(small fields stored directly, every other non-state key or None)."""
    core = {}
    if "v" in checkpoint:
        core["v"] = checkpoint["v"]
    ts = checkpoint.get("ts")
    if ts is not None:  # a None ts is not stored (as a reader rebuilds it)
        core["ts"] = pack_ts_for(ts, checkpoint.get("id"))
    if "updated_channels" in checkpoint:
        uc = checkpoint["updated_channels"]
        core["updated_channels"] = list(uc) if type(uc) is list else uc  # kept with the state
    if checkpoint.keys() <= _NOT_EXTRA:  # the usual checkpoint: no other key
        return core, None
    extra = {k: v for k, v in checkpoint.items() if k not in _NOT_EXTRA}
    return core, (extra or None)


def to_checkpoint(
    checkpoint_id: str, core: dict[str, Any], extra: dict[str, Any] | None, state: State
) -> dict[str, Any]:
    """A Checkpoint dict (without channel values) from a record's parts and state."""
    checkpoint: dict[str, Any] = {"v": core.get("v", 1), "id": checkpoint_id}
    if "ts" in core:
        checkpoint["ts"] = unpack_ts_for(core["ts"], checkpoint_id)
    checkpoint["channel_values"] = {}
    raw_cv, raw_vs = raw_versions(state)
    checkpoint["channel_versions"] = dict(raw_cv)
    checkpoint["versions_seen"] = {n: dict(seen) for n, seen in raw_vs.items()}
    if "updated_channels" in core:
        uc = core["updated_channels"]
        checkpoint["updated_channels"] = list(uc) if type(uc) is list else uc
    if extra:
        checkpoint.update(extra)
    return checkpoint

"""Checkpoint records: keyframes and diffs along the parent chain.

A checkpoint row's ``data`` is a msgpack map (tag ``"tl1"``):

* ``k``: depth, 0 for a keyframe, else the distance to the nearest keyframe
  ancestor (a reader fetches at most ``k`` ancestors, in one query);
* ``b``: the small fields every checkpoint has (``v``, ``ts``,
  ``updated_channels``), ``x``: any other checkpoint key, through the serializer;
* ``cv``/``vs``/``iv``: channel versions, versions_seen and the *inline* channel
  values (``[tag, bytes]`` as produced by the serializer, small ones only). A
  keyframe holds them whole; a diff holds what changed since the parent plus
  ``cx``/``vx``/``ix``, the keys that disappeared.

Standard versions ``"<32-digit counter>.<float>"`` are packed as ``[n, f]`` and
``ts`` as integer microseconds when that re-formats to the identical string.
A 4-checkpoints-per-turn agent then writes ~150 bytes per checkpoint instead of
the whole state, and every version of a small channel costs no extra row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import ormsgpack

__all__ = [
    "RECORD_TAG",
    "State",
    "apply",
    "core_fields",
    "decode",
    "encode",
    "pack_version",
    "to_checkpoint",
    "unpack_version",
]

RECORD_TAG = "tl1"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)
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


_PACKED: dict[str, Any] = {}


def pack_version(version: Any) -> Any:
    """``[counter, float]`` for a standard version string (memoized: the same
    versions recur in every checkpoint's versions_seen), else the version."""
    if type(version) is str:
        packed = _PACKED.get(version)
        if packed is None:
            if len(_PACKED) > 65536:
                _PACKED.clear()
            packed = _PACKED[version] = _pack_version(version)
        return packed
    return version


def _pack_version(version: Any) -> Any:
    if type(version) is str and len(version) > 33 and version[32] == ".":
        head, tail = version[:32], version[33:]
        if head.isdigit():
            try:
                rnd = float(tail)
            except ValueError:
                return version
            if f"{int(head):032}.{rnd:016}" == version:
                return (int(head), rnd)
    return version


_UNPACKED: dict[tuple[int, float], str] = {}


def unpack_version(packed: Any) -> Any:
    if type(packed) is tuple:
        text = _UNPACKED.get(packed)
        if text is None:
            if len(_UNPACKED) > 65536:
                _UNPACKED.clear()
            text = _UNPACKED[packed] = f"{packed[0]:032}.{packed[1]:016}"
        return text
    return packed


def pack_ts(ts: Any) -> Any:
    """Integer microseconds when that re-formats to the identical string."""
    if type(ts) is str and ts.endswith("+00:00"):
        try:
            dt = datetime.fromisoformat(ts)
        except ValueError:
            return ts
        if dt.isoformat() == ts and dt.tzinfo == timezone.utc:
            return (dt - _EPOCH) // _MICROSECOND
    return ts


def unpack_ts(packed: Any) -> Any:
    if type(packed) is int:
        return (_EPOCH + timedelta(microseconds=packed)).isoformat()
    return packed


def _diff(new: dict[str, Any], old: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    changed = {k: v for k, v in new.items() if k not in old or old[k] != v}
    return changed, [k for k in old if k not in new]


def _key(value: Any) -> Any:
    """Table key: packed versions are tuples; anything else keeps its type (1 != 1.0)."""
    kind = type(value)
    if kind is tuple:
        return value
    return tuple(value) if kind is list else (kind.__name__, value)


class _Table:
    """Names or versions of a chain of records; each use is a small int index.

    The base (the parent's tables) is shared, not copied: only additions are
    collected, and the result lists/index are built when something was added.
    """

    def __init__(
        self, base: list[Any], index: dict[Any, int] | None = None, keyed: bool = True
    ) -> None:
        self.base = base
        self.keyed = keyed
        if index is None:
            index = {(_key(v) if keyed else v): i for i, v in enumerate(base)}
        self.base_index = index
        self.new: list[Any] = []
        self.new_index: dict[Any, int] = {}

    def ref(self, value: Any) -> int:
        key = _key(value) if self.keyed else value
        i = self.base_index.get(key)
        if i is None:
            i = self.new_index.get(key)
            if i is None:
                i = self.new_index[key] = len(self.base) + len(self.new)
                self.new.append(value)
        return i

    def added(self) -> list[Any]:
        return self.new

    @property
    def values(self) -> list[Any]:
        return self.base + self.new if self.new else self.base

    @property
    def index(self) -> dict[Any, int]:
        return {**self.base_index, **self.new_index} if self.new else self.base_index


def encode(core: dict[str, Any], extra: Any, state: State, prev: State | None) -> bytes:
    """The record of ``state``: a keyframe when ``prev`` is None, else a diff.

    Names and versions are written once per keyframe interval (``n``/``t`` hold
    only what this record adds); maps become flat ``[name, value, ...]`` lists;
    an inline value written at the version this record sets omits it. Fills
    ``state.names``/``state.versions``.
    """
    index = prev.index if prev is not None and prev.index is not None else (None, None)
    names = _Table(prev.names if prev else [], index[0], keyed=False)  # names are str
    versions = _Table(prev.versions if prev else [], index[1])
    if prev is None:  # a re-written keyframe keeps its tables: children index into them
        for name in state.names:
            names.ref(name)
        for version in state.versions:
            versions.ref(version)
    rec: dict[str, Any] = {"k": state.depth}
    if prev is None:
        cv, vs, iv = state.cv, state.vs, state.iv
    else:
        cv, cx = _diff(state.cv, prev.cv)
        vs, vx = _diff(state.vs, prev.vs)
        iv, ix = _diff(state.iv, prev.iv)
        rec["cx"] = [names.ref(c) for c in cx]
        rec["vx"] = [names.ref(n) for n in vx]
        rec["ix"] = [names.ref(c) for c in ix]
    rec["cv"] = [x for c, v in cv.items() for x in (names.ref(c), versions.ref(v))]
    rec["vs"] = [
        x
        for n, seen in vs.items()
        for x in (
            names.ref(n),
            [y for c, v in seen.items() for y in (names.ref(c), versions.ref(v))],
        )
    ]
    rec["iv"] = [
        [names.ref(c), *e[1:]]
        if c in cv and e[0] == cv[c]
        else [names.ref(c), *e[1:], versions.ref(e[0])]
        for c, e in iv.items()
    ]
    uc = core.get("updated_channels")
    if type(uc) is list and all(type(c) is str for c in uc):
        rec["u"] = [names.ref(c) for c in uc]
    elif "updated_channels" in core:
        rec["U"] = uc
    rec["v"], rec["ts"] = core.get("v", 1), core.get("ts")
    if extra is not None:
        rec["x"] = extra
    rec["n"], rec["t"] = names.added(), versions.added()
    state.names, state.versions = names.values, versions.values
    state.index = (names.index, versions.index)
    keep = ("k", "v", "ts", "U", "u")
    return ormsgpack.packb({k: v for k, v in rec.items() if v or (k in keep and k in rec)})


def decode(data: bytes) -> dict[str, Any]:
    """The raw record (indices unresolved: :func:`apply` needs the base state)."""
    return ormsgpack.unpackb(data)


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
    iv_part = {
        n[e[0]]: [cv_part[n[e[0]]] if len(e) == 3 else t[e[3]], e[1], e[2]]
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
    core = {k: checkpoint[k] for k in _CORE if k in checkpoint}
    if "ts" in core:
        core["ts"] = pack_ts(core["ts"])
    extra = {k: v for k, v in checkpoint.items() if k not in _NOT_EXTRA}
    return core, (extra or None)


def to_checkpoint(
    checkpoint_id: str, core: dict[str, Any], extra: dict[str, Any] | None, state: State
) -> dict[str, Any]:
    """A Checkpoint dict (without channel values) from a record's parts and state."""
    checkpoint: dict[str, Any] = {"v": core.get("v", 1), "id": checkpoint_id}
    if "ts" in core:
        checkpoint["ts"] = unpack_ts(core["ts"])
    checkpoint["channel_values"] = {}
    checkpoint["channel_versions"] = {c: unpack_version(v) for c, v in state.cv.items()}
    checkpoint["versions_seen"] = {
        n: {c: unpack_version(v) for c, v in seen.items()} for n, seen in state.vs.items()
    }
    if "updated_channels" in core:
        checkpoint["updated_channels"] = core["updated_channels"]
    if extra:
        checkpoint.update(extra)
    return checkpoint

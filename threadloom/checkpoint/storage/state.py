"""A checkpoint between its records: the :class:`State` a record chain rebuilds.

:mod:`.record` turns a state into bytes (a keyframe or a diff against the
parent's state) and back; this module holds what both sides of that share and
what a saver does with a state outside the bytes: packing a checkpoint's
versions against its parent's (:func:`pack_state`), the parts of a checkpoint
stored beside them (:func:`core_fields`) and the checkpoint a reader rebuilds
(:func:`to_checkpoint`). Kept apart from the byte layout so that format can be
read on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from threadloom.checkpoint.storage.packing import (
    pack_ts_for,
    pack_version,
    packed_get,
    unpack_ts_for,
    unpack_version,
)
from threadloom.checkpoint.storage.rows import version_key

__all__ = [
    "Changes",
    "State",
    "core_fields",
    "diff",
    "pack_state",
    "raw_versions",
    "ref_keys",
    "to_checkpoint",
]

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
    ts: str | None = None  # core["ts"] formatted (a read checks it so, once: flows.py)


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


def diff(new: dict[str, Any], old: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``(changed entries, removed keys)`` of ``new`` against ``old``."""
    missing = _MISSING
    changed = {}
    for k, v in new.items():
        o = old.get(k, missing)
        if o is not v and (o is missing or o != v):
            changed[k] = v
    return changed, [k for k in old if k not in new] if len(old) > len(new) - len(changed) else []


_MISSING: Any = object()
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
        ts = state.ts
        if ts is None:
            ts = state.ts = unpack_ts_for(core["ts"], checkpoint_id)
        checkpoint["ts"] = ts
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

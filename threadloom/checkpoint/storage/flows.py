"""The saver's read and write logic, once, as sans-I/O flows over :mod:`.ops`.

Each function is a generator: it yields operations, receives their results,
and returns what the saver method returns. :mod:`.drive` runs them against a
backend's executor, sync or async, inside one transaction.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

from threadloom.checkpoint.base import CheckpointTuple, get_checkpoint_id, get_thread_id
from threadloom.checkpoint.storage import record, tuples
from threadloom.checkpoint.storage.drive import Emit
from threadloom.checkpoint.storage.ops import (
    CheckpointRow,
    GetCheckpoint,
    ListCheckpoints,
    LoadAncestors,
    LoadBlobs,
    LoadRefs,
    LoadWrites,
    WriteRow,
)
from threadloom.checkpoint.storage.reading import max_items
from threadloom.checkpoint.storage.record import State
from threadloom.checkpoint.storage.rows import filter_pairs, metadata_matches
from threadloom.checkpoint.storage.values import ValueCodec
from threadloom.errors import CorruptBlobError

__all__ = ["build_tuples", "get_tuple_flow", "list_flow", "resolve_states", "target"]

Flow = Generator[Any, Any, Any]


def target(config: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """``(thread_id, checkpoint_ns, checkpoint_id)`` of a config (every put and
    put_writes starts here: a plain ``str`` thread id takes no other call)."""
    conf = config.get("configurable")
    if conf:
        thread_id = conf.get("thread_id")
        if type(thread_id) is str and thread_id:
            return thread_id, conf.get("checkpoint_ns") or "", conf.get("checkpoint_id") or None
    thread_id = get_thread_id(config)  # type: ignore[arg-type]
    conf = config.get("configurable") or {}
    return thread_id, conf.get("checkpoint_ns") or "", get_checkpoint_id(config)  # type: ignore[arg-type]


def _corrupt(row: CheckpointRow, why: str) -> CorruptBlobError:
    return CorruptBlobError(why, thread_id=row.thread_id, checkpoint_id=row.checkpoint_id)


def _decode(row: CheckpointRow) -> dict[str, Any]:
    if row.tag != record.RECORD_TAG:
        raise _corrupt(row, f"unknown checkpoint record format {row.tag!r}")
    try:
        rec = record.decode(row.data)
    except Exception as exc:
        raise _corrupt(row, f"checkpoint record cannot be decoded ({exc})") from exc
    if type(rec) is not dict or type(rec.get("k")) is not int:
        raise _corrupt(row, "checkpoint record cannot be decoded (not a record)")
    if "v" not in rec or "ts" not in rec:  # every record format writes both (ts may be None)
        raise _corrupt(row, "checkpoint record cannot be decoded (no 'v' or 'ts' field)")
    return rec


def resolve_states(
    codec: ValueCodec,
    rows: Sequence[CheckpointRow],
    known_rows: Sequence[CheckpointRow] = (),
) -> Flow:
    """``{checkpoint_id: (State, core fields, extra)}`` for rows of ONE
    thread/namespace, fetching diff bases with :class:`LoadAncestors` only when
    they are neither in the page, nor in ``known_rows`` (rows at hand that need
    no state of their own: a prune resolves the kept rows only), nor cached."""
    out: dict[str, tuple[State, dict[str, Any], Any]] = {}
    todo = []
    for row in rows:  # a cached state of the very same record bytes is current
        cached = codec.states.get((row.thread_id, row.checkpoint_ns, row.checkpoint_id))
        if cached is not None and cached.data == row.data and cached.core is not None:
            out[row.checkpoint_id] = (cached, cached.core, cached.extra)
        else:
            todo.append(row)
    if not todo:
        return out
    known = {r.checkpoint_id: r for r in known_rows}
    known.update((r.checkpoint_id, r) for r in rows)
    recs = {r.checkpoint_id: _decode(r) for r in todo}
    states: dict[str, State] = {}
    for row in sorted(todo, key=lambda r: r.checkpoint_id):
        if row.checkpoint_id in out:
            continue
        tid, ns = row.thread_id, row.checkpoint_ns
        chain, cur, base = [], row, None
        while True:
            rec = recs.get(cur.checkpoint_id) or recs.setdefault(cur.checkpoint_id, _decode(cur))
            if any(link.checkpoint_id == cur.checkpoint_id for link in chain):
                raise _corrupt(row, f"diff chain loops back to {cur.checkpoint_id!r}")
            chain.append(cur)
            if rec["k"] == 0:
                break
            parent = cur.parent_checkpoint_id
            base = states.get(parent) or codec.states.get((tid, ns, parent))  # type: ignore[arg-type]
            if base is not None:
                break
            if parent is not None and parent not in known:
                fetched = yield LoadAncestors(tid, ns, parent, rec["k"] - 1)
                known.update((r.checkpoint_id, r) for r in fetched)
            if parent is None or parent not in known:
                raise _corrupt(row, f"diff base {parent!r} of {cur.checkpoint_id!r} is missing")
            cur = known[parent]
        for link in reversed(chain):
            try:
                base, core, extra = record.apply(recs[link.checkpoint_id], base)
                # what serving it formats, once (cached on the state): a stored
                # form that cannot be formatted is this record's corruption
                record.raw_versions(base)
                if "ts" in core:  # (a delta needs a uuid6 id; a huge int overflows)
                    base.ts = record.unpack_ts_for(core["ts"], link.checkpoint_id)
            except (KeyError, IndexError, ValueError, TypeError, OverflowError) as exc:
                raise _corrupt(link, f"checkpoint record is inconsistent ({exc!r})") from exc
            base.data, base.core, base.extra = link.data, core, extra
            states[link.checkpoint_id] = base
            codec.states.put((tid, ns, link.checkpoint_id), base)
            out[link.checkpoint_id] = (base, core, extra)
    return {r.checkpoint_id: out[r.checkpoint_id] for r in rows}


def get_tuple_flow(codec: ValueCodec, config: Mapping[str, Any]) -> Flow:
    """Latest (or addressed) checkpoint with values and writes; None if absent."""
    thread_id, ns, checkpoint_id = target(config)
    row = yield GetCheckpoint(thread_id, ns, checkpoint_id)
    if row is None:
        return None
    tuples = yield from build_tuples(codec, [row], remember=True)
    return tuples[0]


def list_flow(
    codec: ValueCodec,
    config: Mapping[str, Any] | None,
    filter: Mapping[str, Any] | None,
    before: Mapping[str, Any] | None,
    limit: int | None,
) -> Flow:
    """Newest first, a page at a time (emitted through :class:`Emit`)."""
    conf = (config or {}).get("configurable") or {}
    # config=None (or {}) lists every thread; a config naming no thread is a
    # mistake (an unset variable), and listing every thread for it would show
    # one user's checkpoints to another
    thread_id = get_thread_id(config) if config else None  # type: ignore[arg-type]
    ns = conf.get("checkpoint_ns")
    pairs = filter_pairs(filter)
    before_id = get_checkpoint_id(before) if before else None  # type: ignore[arg-type]
    only_id = conf.get("checkpoint_id") if thread_id is not None else None
    if only_id:
        row = yield GetCheckpoint(thread_id, ns or "", only_id)  # type: ignore[arg-type]
        if row is not None and (limit is None or limit > 0) and _matches(row, pairs, before_id):
            yield Emit((yield from build_tuples(codec, [row])))
        return
    # an explicit limit up to 32 is one page (one round of reads); lazy
    # consumers of a long or unbounded history still start with 8
    remaining, after = limit, None
    page = limit if limit is not None and 0 < limit <= 32 else 8
    while remaining is None or remaining > 0:
        size = page if remaining is None else min(page, remaining)
        rows = yield ListCheckpoints(thread_id, ns, pairs, before_id, after, size)
        if rows:
            yield Emit((yield from build_tuples(codec, rows)))
        if len(rows) < size:
            return
        if remaining is not None:
            remaining -= len(rows)
        last = rows[-1]
        after = (last.checkpoint_id, last.thread_id, last.checkpoint_ns)
        page = min(page * 2, 256)


def _matches(row: CheckpointRow, pairs: tuple[tuple[str, str], ...], before: str | None) -> bool:
    if before is not None and not row.checkpoint_id < before:
        return False
    return metadata_matches(row.metadata, pairs)


def build_tuples(codec: ValueCodec, rows: Sequence[CheckpointRow], remember: bool = False) -> Flow:
    """CheckpointTuples for rows: per (thread, namespace) in the page one
    writes lookup, and for rows without a current recipe (storage/tuples.py)
    at most one ancestors, one refs and two blobs lookups."""
    recipes = getattr(codec, "recipes", None)
    if len(rows) == 1:  # get_tuple: the same steps without the page's bookkeeping
        row = rows[0]
        thread_id, ns, cid = row.thread_id, row.checkpoint_ns, row.checkpoint_id
        found = yield LoadWrites(thread_id, ns, (cid,))
        served = _served(codec, recipes, row, found, remember)
        if served is not None:
            return [served]
        made = yield from _prepare(codec, thread_id, ns, [row], {cid: found}, remember)
        return [tuples.serve(codec, row, made[cid], False, True)]
    groups: dict[tuple[str, str], list[CheckpointRow]] = {}
    for row in rows:
        groups.setdefault((row.thread_id, row.checkpoint_ns), []).append(row)
    done: dict[tuple[str, str, str], CheckpointTuple] = {}
    for (thread_id, ns), group in groups.items():
        found = yield LoadWrites(thread_id, ns, tuple(r.checkpoint_id for r in group))
        by_cp: dict[str, list[WriteRow]] = {}
        for w in found:
            by_cp.setdefault(w.checkpoint_id, []).append(w)
        misses = []
        for row in group:
            served = _served(codec, recipes, row, by_cp.get(row.checkpoint_id), remember)
            if served is not None:
                done[(thread_id, ns, row.checkpoint_id)] = served
            else:
                misses.append(row)
        if misses:
            made = yield from _prepare(codec, thread_id, ns, misses, by_cp, remember)
            for row in misses:
                cid = row.checkpoint_id
                done[(thread_id, ns, cid)] = tuples.serve(codec, row, made[cid], False, True)
    return [done[(r.thread_id, r.checkpoint_ns, r.checkpoint_id)] for r in rows]


def _served(
    codec: ValueCodec,
    recipes: Any,
    row: CheckpointRow,
    writes: list[WriteRow] | None,
    remember: bool,
) -> CheckpointTuple | None:
    """``row``'s tuple from its kept recipe when that still fits, else None."""
    if recipes is None:
        return None
    recipe = recipes.get((row.thread_id, row.checkpoint_ns, row.checkpoint_id))
    if recipe is None or not tuples.fits(recipe, row, writes, remember):
        return None
    return tuples.serve(codec, row, recipe, remember)


def _prepare(
    codec: ValueCodec,
    thread_id: str,
    ns: str,
    rows: list[CheckpointRow],
    writes: dict[str, list[WriteRow]],
    remember: bool,
) -> Flow:
    """``{checkpoint_id: Recipe}`` for rows of one thread/namespace, fetched
    and kept in the recipe cache where that is exact (storage/tuples.py)."""
    resolved = yield from resolve_states(codec, rows)
    keys = set()
    for state, _, _ in resolved.values():
        keys.update(record.ref_keys(state).items())
    refs, hits = yield from _load_refs(codec, thread_id, ns, keys)
    wrows = [w for row in rows for w in writes.get(row.checkpoint_id, ())]
    decoded, wanted = tuples.decode_writes(codec, wrows)
    blobs: dict[bytes, Any] = {}  # the writes' blobs come with the values' first lookup
    first = rows[0].checkpoint_id
    try:
        values = yield from codec.load(thread_id, first, refs, remember, wanted, blobs, raw=True)
    except CorruptBlobError:
        if not hits:
            raise
        # a cached ref outlived its blobs (another process rewrote the thread)
        codec.forget_thread(thread_id)
        refs, _ = yield from _load_refs(codec, thread_id, ns, keys)
        blobs.clear()
        values = yield from codec.load(thread_id, first, refs, remember, wanted, blobs, raw=True)
    late = tuples.uncached(codec, decoded, blobs)  # evicted while the values loaded
    if late:
        blobs.update((yield LoadBlobs(late, False, thread_id, first, max_items(codec.serde))))
    pending = tuples.write_sources(codec, thread_id, decoded, blobs)
    lists = tuples.list_states(codec, thread_id, ns, refs) if remember and len(rows) == 1 else None
    made = {}
    for row in rows:
        cid = row.checkpoint_id
        state, core, extra = resolved[cid]
        sources = tuples.value_sources(state, values)
        if lists is None and not any(type(src) is list for _, src in sources):
            row_lists: list[Any] | None = []  # no list value: nothing to remember
        else:
            row_lists = lists
        recipe = tuples.Recipe(
            row.tag,
            row.data,
            tuple(writes.get(cid, ())),
            state,
            core,
            extra,
            sources,
            pending.get(cid, []),
            row_lists,
        )
        made[cid] = recipe
        if not codec.cache_reads or all(map(unique_version_key, record.ref_keys(state).values())):
            tuples.keep(codec, thread_id, ns, cid, recipe)
    return made


def unique_version_key(vkey: str) -> bool:
    """Whether a version key (:func:`.rows.version_key`) names one write only:
    the standard form with a random fraction of at least 12 digits."""
    _, dot, fraction = vkey.partition(".")
    digits = fraction[2:]
    return (
        bool(dot)
        and vkey[0] != "="
        and fraction[:2] == "0."
        and len(digits) >= 12
        and len(set(digits)) >= 4
    )


def _load_refs(codec: ValueCodec, thread_id: str, ns: str, keys: set[tuple[str, str]]) -> Flow:
    """``(ref rows, how many came from the cache)``. A ref row never changes
    once written (first write wins; versions identify values), so rows read
    once are kept in ``codec.ref_cache`` until retention touches the thread.

    Only refs whose version carries a random part (``<counter>.<random>``, what
    the runtime writes) are cached: another process may delete a thread and
    write it again, and with deterministic versions ("1", "2", ...) the new
    rows would have the old keys, so a cached row could be stale."""
    if not codec.cache_reads:
        return ((yield LoadRefs(thread_id, ns, tuple(keys))) if keys else []), 0
    cache, refs, ask = codec.ref_cache, [], []
    for channel, vkey in keys:
        ref = cache.get((thread_id, ns, channel, vkey))
        if ref is None:
            ask.append((channel, vkey))
        else:
            refs.append(ref)
    hits = len(refs)
    if ask:
        fetched = yield LoadRefs(thread_id, ns, tuple(ask))
        for ref in fetched:
            if unique_version_key(ref.version):
                cache.put((thread_id, ns, ref.channel, ref.version), ref)
        refs.extend(fetched)
    return refs, hits

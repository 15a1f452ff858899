"""Retention flows: delete a thread, delete by run, copy, prune, stats.

Refs are not owned by checkpoints: a ref row lives while some checkpoint of
its thread/namespace names its ``(channel, version)``, and a blob lives while
some ref row or manifest holds it (``blobs.refs``). So deleting checkpoints is
always: delete the rows, drop the refs no remaining checkpoint names, release
their blobs. Delta bases need no special care: a list version's ref row names
every chunk it needs directly.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Generator, Iterable, Sequence
from typing import Any

from threadloom.checkpoint.base import PruneReport
from threadloom.checkpoint.lease.ops import ReadLease
from threadloom.checkpoint.storage import record
from threadloom.checkpoint.storage.flows import resolve_states
from threadloom.checkpoint.storage.keeprule import kept_checkpoints, needs_ancestors
from threadloom.checkpoint.storage.ops import (
    AdjustRefcounts,
    CheckpointRow,
    CollectStats,
    DeleteCheckpoints,
    DeleteRefs,
    FindRunCheckpoints,
    InsertRows,
    ListCheckpoints,
    LoadBlobs,
    LoadThreadRefs,
    LoadWrites,
)
from threadloom.checkpoint.storage.puts import release
from threadloom.checkpoint.storage.rows import unpack, version_key
from threadloom.checkpoint.storage.values import ValueCodec
from threadloom.errors import ConfigError, IdListError, ThreadBusyError

__all__ = [
    "CheckedBefore",
    "IdListError",
    "check_before_flow",
    "check_strategy",
    "guard_flow",
    "copy_thread_flow",
    "delete_for_runs_flow",
    "delete_thread_flow",
    "prune_flow",
    "stats_flow",
]

Flow = Generator[Any, Any, Any]
STRATEGIES = ("keep_latest", "keep_last_n", "before", "delete")


def _held(rows: Iterable[Any]) -> Counter[bytes]:
    """References held by ref rows or write rows (their ``hashes``)."""
    counts: Counter[bytes] = Counter()
    for row in rows:
        counts.update(unpack(row.hashes))
    return counts


def guard_flow(what: str, thread_ids: Sequence[str], force: bool) -> Flow:
    """Refuse ``what`` on a thread a run holds the lease of (ThreadBusyError naming
    the holder): deleting or overwriting its history would pull state out from
    under the run. Runs inside the operation's write transaction, before any
    write, so a refused operation changes nothing; ``force`` skips the check."""
    if force:
        return
    for thread_id in dict.fromkeys(thread_ids):
        live = yield ReadLease(thread_id)
        if live is not None:
            raise ThreadBusyError(
                thread_id,
                live.holder,
                f"thread {thread_id!r} is busy: run {live.holder!r} holds its lease;"
                f" {what} would change its state under the run (wait for the run to"
                " end, or pass force=True)",
            )


def delete_thread_flow(codec: ValueCodec, thread_id: str, force: bool = False) -> Flow:
    """Every checkpoint, write and ref of the thread; blobs only it held."""
    yield from guard_flow("delete_thread", [thread_id], force)
    codec.forget_thread(thread_id)
    refs = yield LoadThreadRefs(thread_id, None)
    writes = yield LoadWrites(thread_id, None, None)
    deleted = yield DeleteCheckpoints(thread_id, None, None)
    yield DeleteRefs(thread_id, None, None)
    blobs = yield from release(_held(refs) + _held(writes))
    return deleted, blobs


def _remove(
    codec: ValueCodec,
    thread_id: str,
    ns: str,
    rows: list[CheckpointRow],
    doomed: set[str],
    dry: _DryRun | None = None,
    writes: list[Any] | None = None,
) -> Flow:
    """Delete ``doomed`` checkpoints of one namespace (``rows`` = all of it):
    rebase survivors whose diff chain crosses a doomed row into keyframes,
    unlink survivors whose parent goes (or is already gone), drop the writes
    and the refs nothing names any more, release blobs.
    Only the survivors' states are resolved (a ``keep_latest`` of a 20,000
    checkpoint thread decoded all 20,000). ``writes``: the namespace's doomed
    write rows when the caller has read them already.
    Returns (blobs dropped, bytes freed). With ``dry``, only reads and
    returns what the real run would report."""
    if not doomed:
        return 0, 0
    kept = [r for r in rows if r.checkpoint_id not in doomed]
    resolved = (yield from resolve_states(codec, kept, rows)) if kept else {}
    if dry is None and kept:
        rewritten = _survivors(codec, thread_id, ns, rows, resolved, doomed)
        if rewritten:
            yield InsertRows(rewritten)
    ids = tuple(doomed)
    if writes is None:
        writes = yield LoadWrites(thread_id, ns, ids)
    if dry is None:
        yield DeleteCheckpoints(thread_id, ns, ids)
    used = {
        (channel, version_key(record.unpack_version(version)))
        for state, _, _ in resolved.values()
        for channel, version in state.cv.items()
    }
    refs = yield LoadThreadRefs(thread_id, ns)
    unused = [r for r in refs if (r.channel, r.version) not in used]
    if unused and dry is None:
        yield DeleteRefs(thread_id, ns, tuple((r.channel, r.version) for r in unused))
    counts = _held(unused) + _held(writes)
    if dry is None:
        blobs, freed = yield from release(counts)
    else:
        blobs, freed = yield from dry.release(thread_id, counts)
    freed += sum(len(r.data) + 60 for r in unused) + sum(len(w.data) + 60 for w in writes)
    return blobs, freed


class _DryRun:
    """What :func:`release` would drop, without writing: reference counts are
    read once and decremented here, across namespaces and threads, exactly as
    the real run would leave them (keyed per thread when blobs are per thread)."""

    def __init__(self, per_thread_blobs: bool) -> None:
        self.per_thread = per_thread_blobs
        self.counts: dict[tuple[str | None, bytes], list[Any]] = {}  # -> [row, refs, gone]

    def release(self, thread_id: str, counts: Counter[bytes]) -> Flow:
        scope = thread_id if self.per_thread else None
        dropped_blobs = dropped_bytes = 0
        todo = Counter({h: c for h, c in counts.items() if c})
        while todo:
            missing = tuple(h for h in todo if (scope, h) not in self.counts)
            found = (yield LoadBlobs(missing, refcounts=True)) if missing else {}
            for h, (row, refs) in found.items():
                self.counts[(scope, h)] = [row, refs, False]
            nxt: Counter[bytes] = Counter()
            for h, c in todo.items():
                entry = self.counts.get((scope, h))
                if entry is None or entry[2]:
                    continue
                entry[1] -= c
                if entry[1] <= 0:
                    entry[2] = True
                    dropped_blobs += 1
                    dropped_bytes += len(entry[0].data)
                    nxt.update(unpack(entry[0].children))
            todo = nxt
        return dropped_blobs, dropped_bytes


def _survivors(
    codec: ValueCodec,
    thread_id: str,
    ns: str,
    rows: list[CheckpointRow],
    resolved: dict,
    doomed: set[str],
) -> tuple[CheckpointRow, ...]:
    """The kept rows to write back. A diff whose chain crosses a doomed row
    becomes a keyframe (its state cached ready to serve); a row whose parent is
    doomed or missing is left with no parent, as LangGraph's PostgresSaver
    leaves it: ``parent_config`` must never name a checkpoint that is gone
    (``get_state(parent_config)`` would fail, history walks would stop on it).
    Except a checkpoint LangGraph wrote that rebuilds a ``DeltaChannel`` from
    its ancestors (prune keeps them; ``delete_for_runs`` may not): with no
    parent it would read as an empty channel, with the link a read fails
    naming the missing ancestor."""
    by_id = {r.checkpoint_id: r for r in rows}
    out = []
    for row in rows:
        if row.checkpoint_id in doomed:
            continue
        new = row
        if _crosses(row, resolved, by_id, doomed):
            state, core, extra = resolved[row.checkpoint_id]
            keyframe = record.State(state.cv, state.vs, state.iv, 0, state.names, state.versions)
            data = record.encode(core, extra, keyframe, None)
            new = new._replace(data=data)
            keyframe.data, keyframe.core, keyframe.extra = data, core, extra
            codec.states.put((thread_id, ns, row.checkpoint_id), keyframe)
        parent = row.parent_checkpoint_id
        gone = parent is not None and (parent in doomed or parent not in by_id)
        if gone and not needs_ancestors(row):  # else: reading it fails loudly, not empty
            new = new._replace(parent_checkpoint_id=None)
        if new is not row:
            out.append(new)
    return tuple(out)


def _crosses(row: CheckpointRow, resolved: dict, by_id: dict, doomed: set[str]) -> bool:
    """Whether rebuilding ``row`` walks through a doomed checkpoint."""
    cur = row
    while resolved[cur.checkpoint_id][0].depth != 0:
        parent = cur.parent_checkpoint_id
        if parent is None or parent in doomed or parent not in by_id:
            return True
        cur = by_id[parent]
    return False


def delete_for_runs_flow(
    codec: ValueCodec,
    run_ids: Sequence[str],
    force: bool = False,
    threads: Sequence[str] | None = None,
) -> Flow:
    """Checkpoints whose metadata ``run_id`` is listed, with their writes.

    ``threads``: one step of a call cut into transactions (:mod:`.batching`),
    which searched every run once, read-only, to find the threads. The step
    reads only its own threads' rows and matches their ``run_id`` here, under
    its write transaction: searching all the call's runs again in every step
    made 5,000 runs take 220 s instead of 0.9 s on SQLite (the search repeated
    per step, and the step size shrank to fit its time)."""
    if not run_ids:
        return
    wanted = tuple(str(r) for r in run_ids)
    if threads is None:
        codec.forget_thread(None)
        found = yield FindRunCheckpoints(wanted)
        listed: dict[tuple[str, str], list[CheckpointRow]] = {}
    else:
        found, listed = yield from _run_rows(codec, threads, set(wanted))
    yield from guard_flow("delete_for_runs", [row.thread_id for row in found], force)
    groups: dict[tuple[str, str], set[str]] = defaultdict(set)
    for row in found:
        groups[(row.thread_id, row.checkpoint_ns)].add(row.checkpoint_id)
    for (thread_id, ns), ids in groups.items():
        rows = listed.get((thread_id, ns))
        if rows is None:
            rows = yield ListCheckpoints(thread_id, ns)
        yield from _remove(codec, thread_id, ns, rows, ids)


def _run_rows(codec: ValueCodec, threads: Sequence[str], wanted: set[str]) -> Flow:
    """The rows of ``threads`` written by the ``wanted`` runs, and every row of
    each namespace holding one (what :func:`_remove` needs), one read per thread."""
    found: list[CheckpointRow] = []
    listed: dict[tuple[str, str], list[CheckpointRow]] = {}
    for thread_id in dict.fromkeys(threads):
        codec.forget_thread(thread_id)
        by_ns: dict[str, list[CheckpointRow]] = defaultdict(list)
        for row in (yield ListCheckpoints(thread_id, None)):
            by_ns[row.checkpoint_ns].append(row)
            if row.run_id in wanted:
                found.append(row)
                listed[(thread_id, row.checkpoint_ns)] = by_ns[row.checkpoint_ns]
    return found, listed


def copy_thread_flow(codec: ValueCodec, source: str, target: str, force: bool = False) -> Flow:
    """Copy the whole history under ``target``; blobs are shared, not copied.
    Only the target is guarded: reading a running source is like ``get_state``.

    Rows are inserted or replaced, so a copy repeated (a retry after an unknown
    outcome, a re-sync) must count only the difference: each copied row takes
    its references and each target row it replaces gives its own back. The
    target is read first: Redis runs hash-only operations in the scope of the
    thread last named, and the insert must find the source there."""
    if source == target:
        raise ConfigError(f"copy_thread: source and target are the same thread {source!r}")
    yield from guard_flow("copy_thread (target)", [target], force)
    old_refs = yield LoadThreadRefs(target, None)
    old_writes = yield LoadWrites(target, None, None)
    rows = yield ListCheckpoints(source, None)
    refs = {_ref_key(r): r._replace(thread_id=target) for r in (yield LoadThreadRefs(source, None))}
    writes = {
        _write_key(w): w._replace(thread_id=target) for w in (yield LoadWrites(source, None, None))
    }
    codec.forget_thread(target)
    yield InsertRows(
        tuple(r._replace(thread_id=target) for r in rows),
        tuple(refs.values()),
        tuple(writes.values()),
    )
    gained = _held(refs.values()) + _held(writes.values())
    lost = _held([r for r in old_refs if _ref_key(r) in refs])
    lost += _held([w for w in old_writes if _write_key(w) in writes])
    # every gained hash is listed, even at 0: Redis's insert already counted it
    deltas = {h: gained[h] - lost[h] for h in gained.keys() | lost.keys()}
    if deltas:
        yield AdjustRefcounts(tuple(deltas.items()))
    freed = tuple(h for h, d in deltas.items() if d < 0)
    if freed:
        yield from release(Counter(), candidates=freed)


def _ref_key(r: Any) -> tuple[str, str, str]:
    return (r.checkpoint_ns, r.channel, r.version)


def _write_key(w: Any) -> tuple[str, str, str]:
    return (w.checkpoint_ns, w.checkpoint_id, w.task_id)


def check_strategy(strategy: str, keep_last: int | None) -> None:
    """Refuse an unknown strategy or a ``keep_last_n`` without a count (before
    anything runs, even for an empty list of threads)."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"unknown prune strategy {strategy!r}; use one of {STRATEGIES}")
    if strategy == "keep_last_n" and (keep_last is None or keep_last < 1):
        raise ConfigError("prune(strategy='keep_last_n') needs keep_last >= 1")


def prune_flow(
    codec: ValueCodec,
    thread_ids: Sequence[str],
    strategy: str,
    keep_last: int | None,
    before: str | None,
    dry_run: bool,
    per_thread_blobs: bool = False,
    force: bool = False,
) -> Flow:
    """Delete old checkpoints of each thread, never what kept ones need.

    A dry run reads what the real run would and reports the same numbers
    (blobs and bytes freed included), writing nothing. ``per_thread_blobs``:
    the backend stores blobs per thread (Redis), not shared by all threads.
    A real run refuses threads a run holds the lease of unless ``force``."""
    check_strategy(strategy, keep_last)
    if strategy == "before" and not isinstance(before, CheckedBefore):
        yield from check_before_flow(thread_ids, before)
    if not dry_run:
        yield from guard_flow("prune", thread_ids, force)
    totals: Counter[str] = Counter()
    dry = _DryRun(per_thread_blobs) if dry_run else None
    for thread_id in dict.fromkeys(thread_ids):
        codec.forget_thread(thread_id)
        rows = yield ListCheckpoints(thread_id, None)
        if not rows:
            continue
        writes = yield LoadWrites(thread_id, None, None)
        keep = kept_checkpoints(rows, strategy, keep_last, before)
        by_ns: dict[str, list[CheckpointRow]] = defaultdict(list)
        for row in rows:
            by_ns[row.checkpoint_ns].append(row)
        for ns, ns_rows in by_ns.items():
            doomed = {r.checkpoint_id for r in ns_rows if (ns, r.checkpoint_id) not in keep}
            gone = [r for r in ns_rows if r.checkpoint_id in doomed]
            dropped = [w for w in writes if w.checkpoint_ns == ns and w.checkpoint_id in doomed]
            totals["checkpoints"] += len(gone)
            totals["writes"] += len(dropped)
            totals["bytes"] += sum(len(r.data) + len(r.metadata) + 100 for r in gone)
            if not doomed:
                continue
            blobs, freed = yield from _remove(codec, thread_id, ns, ns_rows, doomed, dry, dropped)
            totals["blobs"] += blobs
            totals["bytes"] += freed
    return PruneReport(
        checkpoints=totals["checkpoints"],
        writes=totals["writes"],
        blobs=totals["blobs"],
        bytes_freed=totals["bytes"],
        dry_run=dry_run,
    )


class CheckedBefore(str):
    """A ``prune(strategy="before")`` checkpoint id already checked against all
    the threads of the call (:mod:`.batching`): one transaction of the call
    holds only some of them, so checking again there would refuse the ones
    that do not hold that checkpoint."""

    __slots__ = ()


def check_before_flow(thread_ids: Sequence[str], before: Any) -> Flow:
    """``before`` must be the id of a checkpoint of one of the threads, exactly as
    stored. Ids are compared as text, so a typo, the short id ``threadloom tree``
    shows, another spelling of the same UUID (no hyphens, upper case) or a
    ``run_id`` sorted before almost every id and deleted all but the latest
    checkpoint of each thread."""
    if not before:
        raise ConfigError("prune(strategy='before') needs before=<checkpoint id>")
    seen = False
    for thread_id in dict.fromkeys(thread_ids):
        rows = yield ListCheckpoints(thread_id, None)
        if any(r.checkpoint_id == before for r in rows):
            return
        seen = seen or bool(rows)
    if not seen:
        return  # nothing to prune: nothing to cut wrongly either
    raise ConfigError(
        f"prune(strategy='before'): before={before!r} is not the id of a checkpoint of the"
        " threads given (use it as get_state().config or `threadloom history` show it);"
        " nothing was deleted"
    )


def stats_flow(thread_id: str | None) -> Flow:
    """Counts and sizes, stored vs logical (every version stored in full)."""
    s = yield CollectStats(thread_id)
    stored = s.checkpoint_bytes + s.write_bytes + s.inline_bytes + s.blob_bytes
    return {
        "thread_id": thread_id,
        "checkpoints": s.checkpoints,
        "writes": s.writes,
        "threads": s.threads,
        "channel_versions": s.refs,
        "blobs": s.blobs,
        "bytes_stored": stored,
        "bytes_logical": s.checkpoint_bytes + s.write_bytes + s.logical_bytes,
        "checkpoint_bytes": s.checkpoint_bytes,
        "write_bytes": s.write_bytes,
        "blob_bytes": s.blob_bytes,
        "per_channel": {
            ch: {"versions": n, "logical_bytes": logical, "inline_bytes": inline}
            for ch, (n, logical, inline) in sorted(s.per_channel.items())
        },
        "largest_threads": sorted(s.threads_bytes.items(), key=lambda kv: -kv[1]),
    }


def id_list(ids: Sequence[Any], what: str) -> list[str]:
    """The ids as a list of str, read once (a generator is used up by whoever reads
    it first). A bare string would be taken as its characters (``prune("chat-1")`` pruned
    threads "c", "h", "a", ... and left "chat-1" alone): refuse it (:class:`IdListError`)."""
    if isinstance(ids, (str, bytes)):
        raise IdListError(f"{what} must be a list of ids, not one {type(ids).__name__}: [{ids!r}]")
    return [str(i) for i in ids]

"""Backend-neutral storage operations: the contract between flows and executors.

Everything a saver decides (row mapping, content addressing, list deltas,
reference counting, retention) is written once, in :mod:`.flows`, as
generators. A flow *yields* one of the operations below and is *sent* its
result, exactly like httpx's ``auth_flow`` or psycopg's generators. A backend
only implements an executor: one small function per operation, sync or async,
that runs the operation against its store and returns the documented result.

Rules every executor follows
----------------------------
* The driver (:mod:`.drive`) runs a whole flow inside ONE transaction
  (``write=True`` flows take the write lock up front: SQLite ``BEGIN
  IMMEDIATE``, Postgres a normal transaction). Operations never commit.
* Hashes are 16-byte ``bytes`` (blake2b-128 of ``tag + b"\\0" + data``).
  ``hashes``/``children`` fields pack several hashes back to back (``len`` is a
  multiple of 16, repeats allowed: every occurrence holds one reference).
* Rows are NamedTuples whose field order is the column order of the reference
  (SQLite) schema, so ``executemany(sql, rows)`` works directly.
* Results are plain lists/dicts of rows; an executor never returns backend
  cursor objects (flows may run after the executor moved on).

Reference counting (``blobs.refs``)
-----------------------------------
A blob is held by (a) every occurrence of its hash in a ref row's ``hashes``
and (b) every occurrence in another blob's ``children`` (list manifests hold
their segments). ``SaveCheckpoint`` adds (a) for the ref rows it inserts;
flows add (b) and every decrement through :class:`AdjustRefcounts`, then call
:class:`DropUnreferenced`, so a deleted thread leaves no orphan blob behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = [
    "ANY_ROW",
    "HASH_SIZE",
    "KIND_INLINE",
    "KIND_BLOB",
    "KIND_LIST",
    "KIND_DICT",
    "CheckpointRow",
    "RefRow",
    "BlobRow",
    "WriteRow",
    "SaveResult",
    "StatsResult",
    "Op",
    "GetCheckpoint",
    "ListCheckpoints",
    "FindRunCheckpoints",
    "LoadRefs",
    "LoadThreadRefs",
    "LoadBlobs",
    "LoadWrites",
    "LoadAncestors",
    "SaveCheckpoint",
    "SaveWrites",
    "InsertRows",
    "AdjustRefcounts",
    "DropUnreferenced",
    "DeleteCheckpoints",
    "DeleteRefs",
    "CollectStats",
]

HASH_SIZE = 16

KIND_INLINE = 0
"""Ref row holds the value itself: ``tag`` + ``data``. (Current flows keep small
values inside the checkpoint record instead; readers still accept it.)"""
KIND_BLOB = 1
"""Ref row points at one blob (``hashes`` = that hash) holding the whole value."""
KIND_LIST = 2
"""Ref row is a list stored as chunks: ``hashes`` = manifest hash (present when
``tag == "m"``) + tail chunk hashes, ``length`` = item count, ``data`` = b""."""
KIND_DICT = 3
"""Ref row is a ``dict`` stored field by field (so a large field shares its blob
with equal bytes elsewhere, e.g. the message list an input dict carries):
``data`` = msgpack list of ``[key, tag, payload]`` (inline field) or
``[key, None, hash]`` (blob field); ``hashes`` = those hashes."""


# -- rows -------------------------------------------------------------------


class CheckpointRow(NamedTuple):
    """One checkpoint: its *record* plus filterable metadata.

    ``data`` is an opaque record built by ``storage.record`` (``tag`` names its
    format): either a keyframe (full versions, versions_seen and the small
    channel values) or a diff against the parent checkpoint's record.
    ``metadata`` is JSON text (filterable), ``run_id`` is copied out of the
    metadata so ``delete_for_runs`` can use an index.
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    tag: str
    data: bytes
    metadata: str
    run_id: str | None


class RefRow(NamedTuple):
    """Where the value of ``channel`` at ``version`` lives, for one thread/namespace.

    Keyed by ``(thread_id, checkpoint_ns, channel, version)``; ``version`` is the
    compact text form from :func:`threadloom.checkpoint.storage.rows.version_key`.
    ``logical`` is the size the value would take stored in full (for stats).
    """

    thread_id: str
    checkpoint_ns: str
    channel: str
    version: str
    kind: int
    tag: str
    data: bytes
    hashes: bytes
    length: int
    logical: int


class BlobRow(NamedTuple):
    """Content-addressed bytes shared by every ref (any thread) holding them.

    ``children`` packs the hashes this blob itself holds (a list manifest holds
    its sealed segments); ``b""`` for plain values and chunks.
    """

    hash: bytes
    tag: str
    data: bytes
    children: bytes


class WriteRow(NamedTuple):
    """All pending writes of ONE task against a checkpoint (one row per task).

    Keyed by ``(thread_id, checkpoint_ns, checkpoint_id, task_id)``. ``data`` is
    the flows' encoding of the task's writes (see ``storage.writes``): small
    values inline, large ones as blob hashes, all listed in ``hashes`` (held
    references, exactly like :class:`RefRow`). The flows merge a new
    ``put_writes`` into the existing row, so the executor only replaces rows.
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    task_id: str
    task_path: str
    data: bytes
    hashes: bytes


class SaveResult(NamedTuple):
    """What :class:`SaveCheckpoint` actually inserted.

    ``new_blobs``: hashes that did not exist before (so the flow adds their
    children's references). ``inserted_refs``: one bool per ref row given, False
    when a row with that key already existed (first write wins; no reference
    was added for it). ``stale``: nothing was written because ``base`` or one of
    ``needs`` is gone (another process pruned or deleted the thread); the flow
    re-encodes from storage and retries.
    """

    new_blobs: frozenset[bytes]
    inserted_refs: tuple[bool, ...]
    stale: bool = False


class StatsResult(NamedTuple):
    """Raw aggregates for :meth:`BaseCheckpointSaver.stats`.

    ``blob_bytes`` counts each distinct blob once (what is really stored),
    ``per_channel`` maps channel -> (ref rows, logical bytes, inline bytes),
    ``threads_bytes`` maps thread -> checkpoint + write + inline bytes
    (only the largest ``top`` threads).
    """

    checkpoints: int
    writes: int
    threads: int
    refs: int
    blobs: int
    checkpoint_bytes: int
    write_bytes: int
    inline_bytes: int
    blob_bytes: int
    logical_bytes: int
    per_channel: dict[str, tuple[int, int, int]]
    threads_bytes: dict[str, int]


# -- operations -------------------------------------------------------------


class Op:
    """Base of every operation (executors dispatch on the concrete type).
    Slotted, not frozen, dataclasses (a frozen ``__init__`` costs ~3x on every
    put's hot path); treat them as immutable all the same."""

    __slots__ = ()


@dataclass(slots=True)
class GetCheckpoint(Op):
    """-> ``CheckpointRow | None``: the row with ``checkpoint_id``, or the latest
    (greatest ``checkpoint_id``) of the thread/namespace when it is None."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str | None


@dataclass(slots=True)
class ListCheckpoints(Op):
    """-> ``list[CheckpointRow]`` ordered by ``(checkpoint_id, thread_id,
    checkpoint_ns)`` DESC.

    ``thread_id``/``checkpoint_ns`` None = any. ``filter``: pairs
    ``(key, json_value)``, each meaning ``metadata[key] == json_value`` where
    ``json_value`` is the value's JSON text (keys are pre-validated against
    ``^[A-Za-z0-9_.-]+$``; bind values as parameters). ``before``: only ids
    ``< before``. ``after``: keyset cursor, only rows strictly after this
    ``(checkpoint_id, thread_id, checkpoint_ns)`` in the order above.
    ``limit`` None = all.
    """

    thread_id: str | None
    checkpoint_ns: str | None
    filter: tuple[tuple[str, str], ...] = ()
    before: str | None = None
    after: tuple[str, str, str] | None = None
    limit: int | None = None


@dataclass(slots=True)
class LoadAncestors(Op):
    """-> ``list[CheckpointRow]``: the checkpoint ``checkpoint_id`` itself and then
    its parent, grandparent, ... following ``parent_checkpoint_id`` within the
    thread/namespace, at most ``depth + 1`` rows in total, stopping at a missing
    row. (SQL: a recursive CTE; one round trip.) Used to rebuild a checkpoint
    record stored as a diff against its parent."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    depth: int


@dataclass(slots=True)
class FindRunCheckpoints(Op):
    """-> ``list[CheckpointRow]`` whose ``run_id`` is in ``run_ids`` (any thread)."""

    run_ids: tuple[str, ...]


@dataclass(slots=True)
class LoadRefs(Op):
    """-> ``list[RefRow]`` for the given ``(channel, version_key)`` pairs of one
    thread/namespace (missing keys are simply absent)."""

    thread_id: str
    checkpoint_ns: str
    keys: tuple[tuple[str, str], ...]


@dataclass(slots=True)
class LoadThreadRefs(Op):
    """-> ``list[RefRow]``: every ref row of a thread (one namespace, or all
    when ``checkpoint_ns`` is None)."""

    thread_id: str
    checkpoint_ns: str | None = None


@dataclass(slots=True)
class LoadBlobs(Op):
    """-> ``dict[bytes, BlobRow]`` for the hashes that exist; with ``refcounts``,
    ``dict[bytes, tuple[BlobRow, int]]`` (the row and its reference count: a
    dry-run prune computes what a real one would free). Rows read with
    ``refcounts`` may come back as the backend stores them (Postgres: tag and
    data still packed, never inflated): only their ``children`` and the size
    of their ``data`` are meaningful, as for :class:`DropUnreferenced`.

    For a backend that compresses blobs itself (Postgres): ``max_items`` is the
    reading serializer's ``max_decoded_items`` (None: the default), which the
    msgpack it inflates is held to; ``thread_id``/``checkpoint_id`` say where
    the blobs are read for, named by the error of a damaged one."""

    hashes: tuple[bytes, ...]
    refcounts: bool = False
    thread_id: str | None = None
    checkpoint_id: str | None = None
    max_items: int | None = None


@dataclass(slots=True)
class LoadWrites(Op):
    """-> ``list[WriteRow]`` of the given checkpoints (any order; flows sort).

    ``checkpoint_ids`` None = every write of the thread (``checkpoint_ns`` None =
    every namespace). ``task_id``: only that task's row is wanted (a
    ``put_writes`` merging into its own row; the primary key's last column, so
    a resumed fan-out reads one row per task, not the checkpoint's every row
    per task). An executor may ignore it and return more rows: the flow picks
    the task's.
    """

    thread_id: str
    checkpoint_ns: str | None
    checkpoint_ids: tuple[str, ...] | None
    task_id: str | None = None


@dataclass(slots=True)
class SaveCheckpoint(Op):
    """-> :class:`SaveResult`. Atomically, in this order:

    0. if ``base`` (the checkpoint id a diff record depends on) has no row in
       the thread/namespace, or a hash in ``needs`` (blobs the refs reuse
       without re-sending) has no blob: write nothing, return ``stale=True``;
    1. insert each blob unless its hash exists (``refs`` starts at 0);
    2. insert each ref row unless its key exists; for each inserted row add one
       reference per hash occurrence in ``row.hashes``;
    3. insert or replace the checkpoint row (``row`` may be None: refs only).

    ``max_items``: the writing serializer's ``max_decoded_items`` (None: the
    default), for a backend compressing blobs itself (Postgres), which must
    not compress what a reader with that bound would refuse.
    """

    row: CheckpointRow | None
    refs: tuple[RefRow, ...]
    blobs: tuple[BlobRow, ...]
    base: str | None = None
    needs: tuple[bytes, ...] = ()
    max_items: int | None = None


ANY_ROW: Any = object()
"""``SaveWrites.expected`` entry: no expectation about the task's current row."""


@dataclass(slots=True)
class SaveWrites(Op):
    """-> ``frozenset[bytes]`` (hashes of blobs that were new). Inserts each blob
    unless present (``refs`` 0), then inserts or REPLACES each task row; no
    refcount change unless ``add_refs`` (else the flow adjusts them after).

    ``expected``: per row, the task row the flow read and merged into (None =
    none existed, :data:`ANY_ROW` = no expectation). A backend whose flows are
    not isolated transactions (Redis) writes nothing and returns None when a
    task's current row differs (a concurrent ``put_writes`` of the same task
    came first); the flow then reads and merges again. Transactional backends
    already serialize writers of a thread and may ignore it, unless ``strict``.

    ``strict``: the flow did NOT read the rows (``expected`` all None): the
    executor must check ``expected``, writing nothing and returning None when
    a row differs (the flow then reads and merges). ``add_refs`` (only with
    ``strict``: no replaced row to release): add one reference per hash
    occurrence in each row's ``hashes``. Sent only to executors declaring them
    (``ValueCodec.strict_writes`` / ``writes_add_refs``). ``max_items``: as
    :class:`SaveCheckpoint`'s."""

    rows: tuple[WriteRow, ...]
    blobs: tuple[BlobRow, ...] = ()
    expected: tuple[Any, ...] | None = None
    strict: bool = False
    add_refs: bool = False
    max_items: int | None = None


@dataclass(slots=True)
class InsertRows(Op):
    """-> None. Bulk insert-or-replace (copy_thread); refcounts are NOT touched
    (the flow follows with :class:`AdjustRefcounts`)."""

    checkpoints: tuple[CheckpointRow, ...] = ()
    refs: tuple[RefRow, ...] = ()
    writes: tuple[WriteRow, ...] = ()


@dataclass(slots=True)
class AdjustRefcounts(Op):
    """-> None. ``refs += delta`` for each ``(hash, delta)`` (hashes are unique
    in ``deltas``; unknown hashes are ignored)."""

    deltas: tuple[tuple[bytes, int], ...]


@dataclass(slots=True)
class DropUnreferenced(Op):
    """-> ``list[BlobRow]``: deletes the blobs among ``hashes`` whose ``refs``
    is <= 0 and returns them (the flow then releases their ``children`` and
    counts the size of their ``data``). A backend may return them as it stores
    them, never decoding them (Postgres: still packed): deleting a value must
    not depend on reading it."""

    hashes: tuple[bytes, ...]


@dataclass(slots=True)
class DeleteCheckpoints(Op):
    """-> int (checkpoints deleted). Deletes checkpoint rows AND their write rows
    (flows load and release the writes' ``hashes`` first).

    ``checkpoint_ids`` None = all of the thread; ``checkpoint_ns`` None = every
    namespace (only allowed with ``checkpoint_ids`` None).
    """

    thread_id: str
    checkpoint_ns: str | None
    checkpoint_ids: tuple[str, ...] | None


@dataclass(slots=True)
class DeleteRefs(Op):
    """-> None. Deletes ref rows (no refcount change: flows adjust first).

    ``keys`` None = every ref of the thread (``checkpoint_ns`` None = every ns).
    """

    thread_id: str
    checkpoint_ns: str | None
    keys: tuple[tuple[str, str], ...] | None


@dataclass(slots=True)
class CollectStats(Op):
    """-> :class:`StatsResult` for one thread, or the whole store when None."""

    thread_id: str | None
    top: int = 10

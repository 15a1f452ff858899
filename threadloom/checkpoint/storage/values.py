"""Channel values <-> ref rows and content-addressed blobs, with list deltas.

Rules (see docs/storage.md):

* A value is serialized once (``serde.dumps_typed``). Up to ``inline_max``
  bytes it lives in the ref row; above, in a blob keyed by its hash, stored once
  however many checkpoints, forks, copies or threads hold the same bytes.
* A ``list`` (exact type) is stored as chunks. When the writer's last stored
  list for the same ``(thread, ns, channel)`` is a prefix of the new list
  (``new[:m] == last`` where ``last`` is the writer's snapshot of the items:
  identical objects compare equal without calling ``__eq__``, so for appended
  lists this is a pointer walk), only ``new[m:]`` is serialized, as a new tail
  chunk. Anything else (shorter, changed, first write in this process without
  a prior read) stores the whole list as one chunk: exact first, small second.
* Every ``compact_every`` chunks, the tail is re-serialized into one sealed
  segment and a new manifest (the list of segment hashes) is written; a ref row
  names the manifest plus at most ``compact_every`` tail chunks, so a reader
  fetches any version with two blob lookups, and manifests stay small.
* Items are values: an item mutated in place after it was checkpointed is not
  noticed (the same assumption LangGraph's DeltaChannel makes). The chunk cache
  only ever holds objects decoded from stored bytes (never the caller's), and
  reads share them between versions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ormsgpack

from threadloom.checkpoint.serde.serializer import MsgpackSerializer
from threadloom.checkpoint.storage.cache import LRU, Bounded
from threadloom.checkpoint.storage.ops import KIND_BLOB, KIND_DICT, KIND_LIST, BlobRow, RefRow
from threadloom.checkpoint.storage.reading import (
    EMPTY_TAG,
    FIELD_TAG_CODES,
    MANIFEST2_TAG,
    MANIFEST_MARK,
    MANIFEST_TAG,
    ListState,
    ValueReader,
)
from threadloom.checkpoint.storage.rows import blob_hash, pack

__all__ = ["EMPTY_TAG", "MANIFEST_TAG", "ListState", "ValueCodec"]


_new = tuple.__new__  # a row built without its Python-level NamedTuple.__new__ (half the cost)


def holds_list(value: dict[Any, Any]) -> bool:
    """A dict with a list among its fields: with deltas, :meth:`ValueCodec.encode`
    may store it field by field (see ``_encode_dict``)."""
    for field in value.values():
        if type(field) is list:
            return True
    return False


def whole_blob(
    thread_id: str, ns: str, channel: str, vkey: str, tag: str, data: bytes
) -> tuple[RefRow, BlobRow]:
    """A value stored whole: its ref row and its content-addressed blob."""
    h = blob_hash(tag, data)
    ref = _new(RefRow, (thread_id, ns, channel, vkey, KIND_BLOB, "", b"", h, 0, len(data)))
    return ref, _new(BlobRow, (h, tag, data, b""))


class ValueCodec(ValueReader):
    """Encodes and decodes channel values for one saver (holds its caches)."""

    def __init__(
        self,
        serde: Any,
        *,
        delta: bool = True,
        compact_every: int = 16,
        inline_max: int = 64,
        cache_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.serde = serde
        self.delta = delta
        self.compact_every = max(1, compact_every)
        self.inline_max = inline_max
        self.chunks: LRU[bytes, tuple[Any, ...]] = LRU(65536, cache_bytes)
        self.manifests: LRU[bytes, tuple[bytes, ...]] = LRU(4096, cache_bytes // 8)
        self.lists: Bounded[tuple[str, str, str], ListState] = Bounded(4096)
        self.states: Bounded[tuple[str, str, str], Any] = Bounded(4096)
        # read caches (see reading.py): immutable ref rows by key, whole-value blobs by
        # hash; off where storage is itself process memory (a lookup costs as much)
        self.cache_reads = True
        self.ref_cache: Bounded[tuple[str, str, str, str], RefRow] = Bounded(16384)
        self.blob_cache: LRU[bytes, BlobRow] = LRU(16384, cache_bytes // 4)
        self.keyframe_every = 16
        # what the saver's executor honours in SaveWrites (see ops.SaveWrites):
        # with ``strict_writes`` a task's first put_writes skips reading its row
        self.strict_writes = False
        self.writes_add_refs = False
        self.tasks: Bounded[tuple[str, str, str, str], bool] = Bounded(4096)  # rows written
        self.fanout = 16  # segments per flat manifest (see _manifest)
        # the serializer gives the same bytes for the same unchanged object (the
        # default one, unencrypted: a cipher's random nonce would not, and equal
        # ciphertexts would show equal values), so put_step may reuse a write's
        # bytes for the channel value that is the very same object (step.py)
        self.same_bytes = type(serde) is MsgpackSerializer and serde.cipher is None

    # -- writing ---------------------------------------------------------------

    def encode(
        self, thread_id: str, ns: str, channel: str, vkey: str, value: Any
    ) -> tuple[Sequence[Any] | None, RefRow | None, Sequence[BlobRow], ListState | None]:
        """Where ``channel``'s value at version ``vkey`` goes.

        Returns ``(inline, ref, blobs, list_state)``: ``inline`` is ``(tag, bytes)``
        for a small value (kept in the checkpoint record, no row), else ``ref`` is
        the ref row and ``blobs`` the blobs it may need.
        """
        if type(value) is list and self.delta:
            last = self.lists.get((thread_id, ns, channel))
            if last is not None and last.items and len(last.items) <= len(value):
                return (None, *self._encode_list(thread_id, ns, channel, vkey, value, last))
        elif type(value) is dict and self.delta and holds_list(value):
            split = self._encode_dict(thread_id, ns, channel, vkey, value)  # (see there)
            if split is not None:
                return None, split[0], split[1], None
        tag, data = tagged = self.serde.dumps_typed(value)
        if len(data) <= self.inline_max:
            return tagged, None, (), None
        if type(value) is list and self.delta:
            return (
                None,
                *self._encode_list(thread_id, ns, channel, vkey, value, None, (tag, data)),
            )
        row, blob = whole_blob(thread_id, ns, channel, vkey, tag, data)
        return None, row, [blob], None

    def _encode_list(
        self,
        thread_id: str,
        ns: str,
        channel: str,
        vkey: str,
        value: list[Any],
        last: ListState | None,
        whole: tuple[str, bytes] | None = None,
    ) -> tuple[RefRow, list[BlobRow], ListState]:
        n = len(value)
        blobs: list[BlobRow] = []
        if last is not None and value[: len(last.items)] == last.items:
            m = len(last.items)
            segments, manifest, tails = last.segments, last.manifest, last.tails
            tail_start, logical = last.tail_start, last.logical
            if n > m and len(tails) + 1 >= self.compact_every:
                segment = self._chunk(value[tail_start:], blobs)
                segments = (*segments, segment)
                manifest = self._manifest(segments, blobs)
                logical += len(blobs[0].data) * (n - m) // (n - tail_start)
                tails, tail_start = (), n
            elif n > m:
                tails = (*tails, self._chunk(value[m:], blobs))
                logical += len(blobs[0].data)
        else:
            segments, manifest, tail_start = (), b"", 0
            tails = (self._chunk(value, blobs, whole),) if n else ()
            logical = len(blobs[0].data) if blobs else 0
        state = ListState(list(value), segments, manifest, tails, tail_start, logical)
        row = RefRow(
            thread_id, ns, channel, vkey, KIND_LIST, MANIFEST_MARK if manifest else "", b"",
            manifest + pack(tails), n, logical,
        )  # fmt: skip
        return row, blobs, state

    def _encode_dict(
        self, thread_id: str, ns: str, channel: str, vkey: str, value: dict[Any, Any]
    ) -> tuple[RefRow, list[BlobRow]] | None:
        """Field by field when some field is large (None: store the dict whole).

        A field stored as a blob is ``[key, None, None]`` (its hash is the next
        one in the row's ``hashes``, not repeated), an inline one ``[key, tag,
        bytes]`` with the usual tags as small ints (:data:`FIELD_TAG_CODES`):
        ~47 -> ~23 bytes for a graph input ``{"messages": [...], "turn": 3}``.
        Rows written before (hash repeated, tags as text) read the same.

        Only tried for a dict holding a list (checked in :meth:`encode`): the list an
        input dict carries is the bytes the list channel's next chunk stores, so
        splitting shares them. Any other dict is one value, serialized and
        hashed once (splitting it costs a serializer call and a hash per field
        and shares nothing the whole blob would not).
        """
        if not all(type(k) is str for k in value):
            return None
        fields, blobs, logical = [], [], 0
        for key, field in value.items():
            tag, data = self.serde.dumps_typed(field)
            logical += len(data)
            if len(data) > self.inline_max:
                h = blob_hash(tag, data)
                blobs.append(BlobRow(h, tag, data, b""))
                fields.append([key, None, None])  # its hash: the next one in ``hashes``
            else:
                fields.append([key, FIELD_TAG_CODES.get(tag, tag), data])
        if not blobs:
            return None
        hashes = pack(b.hash for b in blobs)
        row = RefRow(
            thread_id, ns, channel, vkey, KIND_DICT, "", ormsgpack.packb(fields), hashes, 0, logical
        )
        return row, blobs

    def _chunk(
        self, items: list[Any], blobs: list[BlobRow], whole: tuple[str, bytes] | None = None
    ) -> bytes:
        tag, data = whole if whole is not None else self.serde.dumps_typed(items)
        h = blob_hash(tag, data)
        blobs.append(BlobRow(h, tag, data, b""))
        # not cached from the caller's live objects: reads decode what was stored
        return h

    def _manifest(self, segments: tuple[bytes, ...], blobs: list[BlobRow]) -> bytes:
        """A flat manifest every ``fanout`` segments; in between, a two-level one
        (the last flat manifest + the newer segments), so a compaction writes
        and counts at most ``fanout`` hashes instead of all of them."""
        covered = len(segments) // self.fanout * self.fanout
        if covered in (0, len(segments)):
            return self._flat(segments, blobs)
        older = self._flat(segments[:covered], blobs)  # exists: re-sent, never re-stored
        data = older + pack(segments[covered:])
        h = blob_hash(MANIFEST2_TAG, data)
        blobs.append(BlobRow(h, MANIFEST2_TAG, data, data))
        self.manifests.put(h, segments, len(data))
        return h

    def _flat(self, segments: tuple[bytes, ...], blobs: list[BlobRow]) -> bytes:
        data = pack(segments)
        h = blob_hash(MANIFEST_TAG, data)
        blobs.append(BlobRow(h, MANIFEST_TAG, data, data))
        self.manifests.put(h, segments, len(data))
        return h

    def remember(self, thread_id: str, ns: str, channel: str, state: ListState) -> None:
        """Record what was stored (or read) so the next put can store a delta."""
        self.lists.put((thread_id, ns, channel), state)

    def forget_thread(self, thread_id: str | None) -> None:
        """Retention changed what is stored: drop writer state and cached rows
        (all when None). Cached blob bytes go in every case: erased values do
        not linger in the process either."""
        self.blob_cache.clear()
        if thread_id is None:
            self.lists.clear()
            self.states.clear()
            self.ref_cache.clear()
        else:
            self.lists.discard_where(lambda key: key[0] == thread_id)
            self.states.discard_where(lambda key: key[0] == thread_id)
            self.ref_cache.discard_where(lambda key: key[0] == thread_id)

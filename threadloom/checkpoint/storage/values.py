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

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import ormsgpack

from threadloom.checkpoint.storage.cache import LRU
from threadloom.checkpoint.storage.ops import (
    HASH_SIZE,
    KIND_BLOB,
    KIND_DICT,
    KIND_INLINE,
    KIND_LIST,
    BlobRow,
    LoadBlobs,
    RefRow,
)
from threadloom.checkpoint.storage.rows import blob_hash, pack, unpack
from threadloom.errors import CorruptBlobError

__all__ = ["EMPTY_TAG", "MANIFEST_TAG", "ListState", "ValueCodec"]

EMPTY_TAG = "empty"
MANIFEST_TAG = "threadloom.manifest"
MANIFEST2_TAG = "threadloom.manifest2"  # first entry: a flat manifest of older segments
MANIFEST_MARK = "m"  # RefRow.tag of a list whose ``hashes`` start with a manifest


@dataclass(slots=True)
class ListState:
    """The writer's view of the last stored list of one channel."""

    items: list[Any]
    segments: tuple[bytes, ...]
    manifest: bytes
    tails: tuple[bytes, ...]
    tail_start: int
    logical: int


def _has_list(value: dict[Any, Any]) -> bool:
    for field in value.values():
        if type(field) is list:
            return True
    return False


class ValueCodec:
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
        self.lists: LRU[tuple[str, str, str], ListState] = LRU(4096, 1 << 62)
        self.states: LRU[tuple[str, str, str], Any] = LRU(4096, 1 << 62)
        self.keyframe_every = 16
        self.fanout = 16  # segments per flat manifest (see _manifest)

    # -- writing ---------------------------------------------------------------

    def encode(
        self, thread_id: str, ns: str, channel: str, vkey: str, value: Any
    ) -> tuple[list[Any] | None, RefRow | None, list[BlobRow], ListState | None]:
        """Where ``channel``'s value at version ``vkey`` goes.

        Returns ``(inline, ref, blobs, list_state)``: ``inline`` is ``[tag, bytes]``
        for a small value (kept in the checkpoint record, no row), else ``ref`` is
        the ref row and ``blobs`` the blobs it may need.
        """
        if type(value) is list and self.delta:
            last = self.lists.get((thread_id, ns, channel))
            if last is not None and last.items and len(last.items) <= len(value):
                return (None, *self._encode_list(thread_id, ns, channel, vkey, value, last))
        if type(value) is dict and value and self.delta and _has_list(value):
            split = self._encode_dict(thread_id, ns, channel, vkey, value)
            if split is not None:
                return None, split[0], split[1], None
        tag, data = self.serde.dumps_typed(value)
        if len(data) <= self.inline_max:
            return [tag, data], None, [], None
        if type(value) is list and self.delta:
            return (
                None,
                *self._encode_list(thread_id, ns, channel, vkey, value, None, (tag, data)),
            )
        h = blob_hash(tag, data)
        row = RefRow(thread_id, ns, channel, vkey, KIND_BLOB, "", b"", h, 0, len(data))
        return None, row, [BlobRow(h, tag, data, b"")], None

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

        Only tried for a dict holding a list (:func:`_has_list`): the list an
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
                fields.append([key, None, h])
            else:
                fields.append([key, tag, data])
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
        """Retention changed what is stored: drop writer state (all when None)."""
        if thread_id is None:
            self.lists.clear()
            self.states.clear()
        else:
            self.lists.discard_where(lambda key: key[0] == thread_id)
            self.states.discard_where(lambda key: key[0] == thread_id)

    # -- reading ---------------------------------------------------------------

    def load(
        self,
        thread_id: str,
        checkpoint_id: str,
        refs: list[RefRow],
        remember: bool = False,
        also: tuple[bytes, ...] = (),
        blobs: dict[bytes, BlobRow] | None = None,
    ) -> Generator[Any, Any, dict[tuple[str, str], Any]]:
        """Flow: values of ``refs`` keyed by ``(channel, version)``; at most three
        :class:`LoadBlobs` (tails + manifest, its older manifest + segments, the
        older segments), fewer when the caches hold the pieces.

        ``also``: more hashes to fetch with the first lookup (pending writes'
        blobs: one round trip fewer); fetched blobs land in ``blobs``."""
        blobs = {} if blobs is None else blobs
        extra = set(also)
        while True:
            missing, extra = extra, set()
            for ref in refs:
                if ref.kind == KIND_BLOB:  # the common case, inline: one hash, never a chunk
                    if ref.hashes not in blobs:
                        missing.add(ref.hashes)
                    continue
                for h in self._needed(ref, blobs, missing):
                    if h not in blobs and self.chunks.get(h) is None:
                        missing.add(h)
            if not missing:
                break
            found = yield LoadBlobs(tuple(missing))
            if not found:
                break  # truly missing: reported with its location below
            blobs.update(found)
        values: dict[tuple[str, str], Any] = {}
        for ref in refs:
            key = (ref.channel, ref.version)
            if ref.kind == KIND_INLINE:
                if ref.tag != EMPTY_TAG:
                    values[key] = self._loads(ref.tag, ref.data, ref, checkpoint_id)
            elif ref.kind == KIND_BLOB:
                blob = blobs.get(ref.hashes) or self._blob(
                    blobs, ref.hashes, ref, thread_id, checkpoint_id
                )
                values[key] = self._loads(blob.tag, blob.data, ref, checkpoint_id)
            elif ref.kind == KIND_DICT:
                values[key] = self._assemble_dict(ref, blobs, checkpoint_id)
            else:
                values[key] = self._assemble(ref, blobs, checkpoint_id, remember)
        return values

    def _assemble_dict(
        self, ref: RefRow, blobs: dict[bytes, BlobRow], checkpoint_id: str
    ) -> dict[str, Any]:
        result = {}
        for key, tag, payload in ormsgpack.unpackb(ref.data):
            if tag is not None:
                result[key] = self._loads(tag, payload, ref, checkpoint_id)
            elif (cached := self.chunks.get(payload)) is not None:
                result[key] = list(cached)
            else:
                blob = self._blob(blobs, payload, ref, ref.thread_id, checkpoint_id)
                result[key] = self._loads(blob.tag, blob.data, ref, checkpoint_id)
        return result

    def _needed(self, ref: RefRow, blobs: dict[bytes, BlobRow], missing: set[bytes]) -> Any:
        """Blob hashes ``ref`` needs that are known so far (manifests expand as
        their blobs arrive; unexpandable ones are added to ``missing``)."""
        if ref.kind == KIND_BLOB:
            return (ref.hashes,)
        if ref.kind == KIND_DICT:
            return unpack(ref.hashes)
        if ref.kind != KIND_LIST:
            return ()
        hashes = unpack(ref.hashes)
        if ref.tag != MANIFEST_MARK:
            return hashes
        segments = self._expand(hashes[0], blobs, missing)
        return hashes[1:] + (segments or ())

    def _expand(
        self, h: bytes, blobs: dict[bytes, BlobRow], missing: set[bytes]
    ) -> tuple[bytes, ...] | None:
        """Segments a (possibly two-level) manifest lists; None until loaded."""
        segments = self.manifests.get(h)
        if segments is not None:
            return segments
        blob = blobs.get(h)
        if blob is None:
            missing.add(h)
            return None
        entries = unpack(blob.data)
        if blob.tag == MANIFEST2_TAG:
            older = self._expand(entries[0], blobs, missing)
            if older is None:
                return None
            entries = older + entries[1:]
        self.manifests.put(h, entries, len(blob.data))
        return entries

    def _segments(
        self, ref: RefRow, blobs: dict[bytes, BlobRow], thread_id: str, checkpoint_id: str
    ) -> tuple[bytes, ...]:
        segments = self._expand(ref.hashes[:HASH_SIZE], blobs, set())
        if segments is None:
            raise CorruptBlobError(
                "list manifest is missing",
                thread_id=thread_id,
                checkpoint_id=checkpoint_id,
                channel=ref.channel,
            )
        return segments

    def _assemble(
        self, ref: RefRow, blobs: dict[bytes, BlobRow], checkpoint_id: str, remember: bool
    ) -> list[Any]:
        tid = ref.thread_id
        has_manifest = ref.tag == MANIFEST_MARK
        segments = self._segments(ref, blobs, tid, checkpoint_id) if has_manifest else ()
        manifest = ref.hashes[:HASH_SIZE] if has_manifest else b""
        tails = unpack(ref.hashes[len(manifest) :])
        items: list[Any] = []
        for h in segments:
            items.extend(self._items(h, blobs, ref, checkpoint_id))
        tail_start = len(items)
        for h in tails:
            items.extend(self._items(h, blobs, ref, checkpoint_id))
        if len(items) != ref.length:
            raise CorruptBlobError(
                f"list has {len(items)} items, expected {ref.length}",
                thread_id=tid,
                checkpoint_id=checkpoint_id,
                channel=ref.channel,
            )
        if remember and self.delta:
            state = ListState(items, segments, manifest, tails, tail_start, ref.logical)
            self.remember(tid, ref.checkpoint_ns, ref.channel, state)
        return list(items)

    def _items(
        self, h: bytes, blobs: dict[bytes, BlobRow], ref: RefRow, checkpoint_id: str
    ) -> tuple[Any, ...]:
        cached = self.chunks.get(h)
        if cached is not None:
            return cached
        blob = self._blob(blobs, h, ref, ref.thread_id, checkpoint_id)
        items = self._loads(blob.tag, blob.data, ref, checkpoint_id)
        if type(items) is not list:
            raise CorruptBlobError(
                "list chunk does not hold a list",
                thread_id=ref.thread_id,
                checkpoint_id=checkpoint_id,
                channel=ref.channel,
            )
        result = tuple(items)
        self.chunks.put(h, result, len(blob.data) + 64)
        return result

    def _blob(
        self, blobs: dict[bytes, BlobRow], h: bytes, ref: RefRow, tid: str, cid: str
    ) -> BlobRow:
        blob = blobs.get(h)
        if blob is None or len(h) != HASH_SIZE:
            raise CorruptBlobError(
                f"blob {h.hex()} is missing", thread_id=tid, checkpoint_id=cid, channel=ref.channel
            )
        return blob

    def _loads(self, tag: str, data: bytes, ref: RefRow, checkpoint_id: str) -> Any:
        try:
            return self.serde.loads_typed((tag, data))
        except Exception as exc:
            if isinstance(exc, CorruptBlobError) and exc.thread_id is not None:
                raise
            raise CorruptBlobError(
                f"stored value cannot be decoded ({type(exc).__name__}: {exc})",
                thread_id=ref.thread_id,
                checkpoint_id=checkpoint_id,
                channel=ref.channel,
            ) from exc

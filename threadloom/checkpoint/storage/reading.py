"""Reading channel values back: ref rows + blobs -> values (the codec's read half).

:class:`ValueReader` is mixed into :class:`~.values.ValueCodec`; it relies on
the codec's caches (``chunks``, ``manifests``, ``blob_cache``) and ``serde``.
Whole-value blobs read once are kept by hash in ``blob_cache`` (bounded by
bytes): content-addressed bytes never change, so a re-read of a checkpoint
(polling ``get_state``, re-listing history) needs no blob lookup.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import ormsgpack

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
from threadloom.checkpoint.storage.rows import unpack
from threadloom.checkpoint.storage.tags import EMPTY_TAG, FIELD_TAG_CODES, FIELD_TAG_NAMES
from threadloom.errors import CorruptBlobError, SerializationError

__all__ = [
    "EMPTY_TAG",
    "FIELD_TAG_CODES",
    "FIELD_TAG_NAMES",
    "Decoded",
    "MANIFEST2_TAG",
    "MANIFEST_MARK",
    "MANIFEST_TAG",
    "ListState",
    "ValueReader",
    "undecodable",
]

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


class Decoded:
    """A value :meth:`ValueReader.load` had to deserialize even when asked for
    raw ``(tag, bytes)`` (a dict stored field by field)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _NoCache:
    """Stands in for ``blob_cache`` when reads are not cached."""

    def get(self, key: Any) -> None:
        return None

    def put(self, key: Any, value: Any, weight: int = 1) -> None:
        pass


_NO_CACHE = _NoCache()


def undecodable(
    exc: Exception, thread_id: str, checkpoint_id: str, channel: str | None
) -> SerializationError:
    """The error of a stored value the serializer did not revive, naming where
    it is stored. The serializer's own refusals (a class neither registered nor
    allowlisted, a row its cipher settings refuse, an unknown tag) keep their
    type, :class:`SerializationError`, with its path and type name: a missing
    registration is not corruption. Anything else is a CorruptBlobError."""
    where = f"thread {thread_id!r}, checkpoint {checkpoint_id!r}" + (
        f", channel {channel!r}" if channel is not None else ""
    )
    if isinstance(exc, SerializationError) and not isinstance(exc, CorruptBlobError):
        return SerializationError(f"{exc} ({where})", path=exc.path, type_name=exc.type_name)
    return CorruptBlobError(
        f"stored value cannot be decoded ({type(exc).__name__}: {exc})",
        thread_id=thread_id,
        checkpoint_id=checkpoint_id,
        channel=channel,
    )


def max_items(serde: Any) -> int | None:
    """The serializer's ``max_decoded_items`` (None: it has none, the default
    applies), for a backend inflating blobs it compressed itself."""
    bound = getattr(serde, "max_decoded_items", None)
    if bound is None:  # e.g. EncryptedSerializer: its inner serializer's
        bound = getattr(getattr(serde, "serde", None), "max_decoded_items", None)
    return bound if type(bound) is int else None


_KINDS = frozenset({KIND_INLINE, KIND_BLOB, KIND_LIST, KIND_DICT})


def _ref_ok(ref: RefRow) -> bool:
    """Whether a ref row has the field types every backend stores (a row of
    another shape, e.g. a damaged Redis value, is refused where it is read)."""
    return (
        type(ref.tag) is str
        and type(ref.data) is bytes
        and type(ref.hashes) is bytes
        and type(ref.length) is int
    )


class ValueReader:
    """The read half of the value codec (see the module doc)."""

    serde: Any
    delta: bool
    chunks: Any
    manifests: Any
    blob_cache: Any
    cache_reads: bool
    skim = False
    """Inspection tools that print no values (the CLI listings) set it: a list or
    dict stored in pieces comes back empty instead of assembled (pieces its
    serializer cannot read, e.g. encrypted without the key, would not add up)."""

    def remember(self, thread_id: str, ns: str, channel: str, state: ListState) -> None:
        raise NotImplementedError

    def load(
        self,
        thread_id: str,
        checkpoint_id: str,
        refs: list[RefRow],
        remember: bool = False,
        also: tuple[bytes, ...] = (),
        blobs: dict[bytes, BlobRow] | None = None,
        raw: bool = False,
    ) -> Generator[Any, Any, dict[tuple[str, str], Any]]:
        """Flow: values of ``refs`` keyed by ``(channel, version)``; at most three
        :class:`LoadBlobs` (tails + manifest, its older manifest + segments, the
        older segments), fewer when the caches hold the pieces.

        ``also``: more hashes to fetch with the first lookup (pending writes'
        blobs: one round trip fewer); fetched blobs land in ``blobs``. Whole
        values (``KIND_BLOB`` and ``also``) are served from and kept in
        ``blob_cache``. ``raw``: a plain value comes back as its ``(tag, bytes)``
        (the caller deserializes it when serving, storage/tuples.py), a dict
        stored field by field as :class:`Decoded`, a list as a fresh list."""
        for ref in refs:
            if ref.kind not in _KINDS or not _ref_ok(ref):
                raise CorruptBlobError(
                    f"ref row of version {ref.version!r} is damaged (kind {ref.kind!r})",
                    thread_id=thread_id,
                    checkpoint_id=checkpoint_id,
                    channel=ref.channel,
                )
        blobs = {} if blobs is None else blobs
        cache = self.blob_cache if self.cache_reads else _NO_CACHE
        whole, extra = set(also), set()
        for h in also:
            if h not in blobs and (hit := cache.get(h)) is None:
                extra.add(h)
            elif h not in blobs:
                blobs[h] = hit
        while True:
            missing, extra = extra, set()
            for ref in refs:
                if ref.kind == KIND_BLOB:  # the common case, inline: one hash, never a chunk
                    h = ref.hashes
                    if h not in blobs:
                        hit = cache.get(h) if cache is not _NO_CACHE else None
                        if hit is not None:
                            blobs[h] = hit
                        else:
                            missing.add(h)
                            whole.add(h)
                    continue
                for h in self._needed(ref, blobs, missing):
                    if h not in blobs and self.chunks.get(h) is None:
                        missing.add(h)
            if not missing:
                break
            found = yield LoadBlobs(
                tuple(missing), False, thread_id, checkpoint_id, max_items(self.serde)
            )
            if not found:
                break  # truly missing: reported with its location below
            for h, blob in found.items():
                if type(blob.tag) is not str or type(blob.data) is not bytes:
                    raise CorruptBlobError(
                        f"blob {h.hex()} is damaged",
                        thread_id=thread_id,
                        checkpoint_id=checkpoint_id,
                    )
            blobs.update(found)
            if cache is not _NO_CACHE:  # (memory: storage is a dict already)
                for h in whole.intersection(found):
                    cache.put(h, found[h], len(found[h].data) + 64)
        values: dict[tuple[str, str], Any] = {}
        for ref in refs:
            key = (ref.channel, ref.version)
            if ref.kind == KIND_INLINE:
                if ref.tag != EMPTY_TAG:
                    typed = (ref.tag, ref.data)
                    values[key] = typed if raw else self._loads(*typed, ref, checkpoint_id)
            elif ref.kind == KIND_BLOB:
                blob = blobs.get(ref.hashes) or self._blob(
                    blobs, ref.hashes, ref, thread_id, checkpoint_id
                )
                typed = (blob.tag, blob.data)
                values[key] = typed if raw else self._loads(*typed, ref, checkpoint_id)
            elif ref.kind == KIND_DICT:
                value = {} if self.skim else self._assemble_dict(ref, blobs, checkpoint_id)
                values[key] = Decoded(value) if raw else value
            elif self.skim:
                values[key] = []
            else:
                values[key] = self._assemble(ref, blobs, checkpoint_id, remember)
        return values

    def _assemble_dict(
        self, ref: RefRow, blobs: dict[bytes, BlobRow], checkpoint_id: str
    ) -> dict[str, Any]:
        """A dict stored field by field (see ``ValueCodec._encode_dict``): a
        blob field's hash is the next of ``hashes`` (rows written before also
        repeat it in the field), an inline field's tag may be a small int."""
        result = {}
        held = iter(unpack(ref.hashes))
        for key, tag, payload in ormsgpack.unpackb(ref.data):
            if tag is not None:
                if type(tag) is int:
                    tag = self._field_tag(tag, ref, checkpoint_id)
                result[key] = self._loads(tag, payload, ref, checkpoint_id)
                continue
            h = next(held, None)
            payload = h if payload is None else payload
            if payload is None:
                raise CorruptBlobError(
                    f"dict field {key!r} names no blob",
                    thread_id=ref.thread_id,
                    checkpoint_id=checkpoint_id,
                    channel=ref.channel,
                )
            if (cached := self.chunks.get(payload)) is not None:
                result[key] = list(cached)
            else:
                blob = self._blob(blobs, payload, ref, ref.thread_id, checkpoint_id)
                result[key] = self._loads(blob.tag, blob.data, ref, checkpoint_id)
        return result

    def _field_tag(self, code: int, ref: RefRow, checkpoint_id: str) -> str:
        if 0 <= code < len(FIELD_TAG_NAMES):
            return FIELD_TAG_NAMES[code]
        raise CorruptBlobError(
            f"dict field tag code {code} is not one threadloom writes",
            thread_id=ref.thread_id,
            checkpoint_id=checkpoint_id,
            channel=ref.channel,
        )

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
            raise undecodable(exc, ref.thread_id, checkpoint_id, ref.channel) from exc

"""Checkpoints and writes <-> rows: the mapping every backend shares.

The checkpoint *body* (everything but ``channel_values``) is stored through the
saver's serializer in a compact shape: standard channel versions
``"<32-digit counter>.<random float>"`` (50 characters) become ``[counter,
float]`` (~12 bytes) when that re-formats to the identical string, and the id
is not repeated (it is the row key). A 4-checkpoints-per-turn agent writes
thousands of versions, so this alone saves most of a checkpoint row.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from hashlib import blake2b
from typing import Any

from threadloom.checkpoint.base import get_checkpoint_metadata
from threadloom.checkpoint.storage.ops import HASH_SIZE
from threadloom.errors import ConfigError, CorruptBlobError

__all__ = [
    "blob_hash",
    "decode_body",
    "dump_metadata",
    "encode_body",
    "filter_pairs",
    "load_metadata",
    "pack",
    "unpack",
    "version_key",
]

_FILTER_KEY = re.compile(r"^[A-Za-z0-9_.-]+$")


def blob_hash(tag: str, data: bytes) -> bytes:
    """Content address of a serialized value: blake2b-128 over tag and bytes."""
    h = blake2b(tag.encode(), digest_size=HASH_SIZE)
    h.update(b"\0")
    h.update(data)
    return h.digest()


def pack(hashes: Any) -> bytes:
    """Hashes back to back (the ``hashes``/``children`` column format)."""
    return b"".join(hashes)


def unpack(packed: bytes) -> tuple[bytes, ...]:
    """Inverse of :func:`pack`."""
    return tuple(packed[i : i + HASH_SIZE] for i in range(0, len(packed), HASH_SIZE))


def version_key(version: str | int | float) -> str:
    """Short, injective text key of a channel version (refs are keyed by it).

    ``"000…0007.0.123"`` -> ``"7.0.123"``; any other version -> ``"=" + str(v)``
    (a standard key starts with a digit, so the two forms never collide).
    """
    if type(version) is str and len(version) > 33 and version[32] == ".":
        head = version[:32]
        if head.isdigit():
            return f"{int(head)}{version[32:]}"
    return f"={version}"


def _pack_version(version: Any) -> Any:
    if type(version) is str and len(version) > 33 and version[32] == ".":
        head, tail = version[:32], version[33:]
        if head.isdigit():
            try:
                rnd = float(tail)
            except ValueError:
                return version
            if f"{int(head):032}.{rnd:016}" == version:
                return [int(head), rnd]
    return version


def _unpack_version(packed: Any) -> Any:
    if type(packed) is list:
        return f"{packed[0]:032}.{packed[1]:016}"
    return packed


def encode_body(checkpoint: Mapping[str, Any]) -> dict[str, Any]:
    """The stored body of a checkpoint: no values, no id, compact versions."""
    body = {k: v for k, v in checkpoint.items() if k not in ("channel_values", "id")}
    body["channel_versions"] = {
        c: _pack_version(v) for c, v in checkpoint["channel_versions"].items()
    }
    body["versions_seen"] = {
        n: {c: _pack_version(v) for c, v in seen.items()}
        for n, seen in checkpoint["versions_seen"].items()
    }
    return body


def decode_body(body: dict[str, Any], checkpoint_id: str) -> dict[str, Any]:
    """Inverse of :func:`encode_body` (``channel_values`` is filled by the caller)."""
    result: dict[str, Any] = {"v": body.get("v", 1), "id": checkpoint_id}
    result.update(body)
    result["id"] = checkpoint_id
    result["channel_versions"] = {
        c: _unpack_version(v) for c, v in body["channel_versions"].items()
    }
    result["versions_seen"] = {
        n: {c: _unpack_version(v) for c, v in seen.items()}
        for n, seen in body["versions_seen"].items()
    }
    result["channel_values"] = {}
    return result


def dump_metadata(config: Mapping[str, Any], metadata: Mapping[str, Any]) -> tuple[str, Any]:
    """Stored metadata (JSON text) and its run_id, after the contract's filtering."""
    md = get_checkpoint_metadata(dict(config), dict(metadata))  # type: ignore[arg-type]
    text = json.dumps(md, ensure_ascii=False, separators=(",", ":"), default=_json_default)
    run_id = md.get("run_id")
    return text, (str(run_id) if run_id is not None else None)


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def load_metadata(text: str, thread_id: str, checkpoint_id: str) -> dict[str, Any]:
    """Parse stored metadata, naming the checkpoint when it is not JSON."""
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise CorruptBlobError(
            f"checkpoint metadata is not JSON: {exc}",
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
        ) from exc


def filter_pairs(filter: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """Validated ``(key, json_value)`` pairs for :class:`ListCheckpoints`.

    Keys must match ``^[A-Za-z0-9_.-]+$`` (they end up in a JSON path; values
    are always bound as parameters), else :class:`ConfigError`.
    """
    if not filter:
        return ()
    pairs = []
    for key, value in filter.items():
        if not isinstance(key, str) or not _FILTER_KEY.match(key):
            raise ConfigError(
                f"invalid metadata filter key {key!r}: keys must match ^[A-Za-z0-9_.-]+$"
            )
        pairs.append((key, json.dumps(value, ensure_ascii=False, separators=(",", ":"))))
    return tuple(pairs)

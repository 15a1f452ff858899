"""Small pieces of row mapping every backend shares: hashes, version keys,
metadata JSON and validated metadata filters."""

from __future__ import annotations

import json
import json.scanner
import math
import re
from collections.abc import Mapping
from hashlib import blake2b
from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
from json.encoder import encode_basestring as _encode_str
from typing import Any

from threadloom.checkpoint.base import get_checkpoint_metadata
from threadloom.checkpoint.storage.ops import HASH_SIZE
from threadloom.checkpoint.storage.packing import packed_get as _packed_get
from threadloom.errors import ConfigError, CorruptBlobError, SerializationError

__all__ = [
    "blob_hash",
    "check_metadata",
    "dump_metadata",
    "filter_pairs",
    "metadata_matches",
    "load_metadata",
    "pack",
    "unpack",
    "version_key",
]

# a key SQLite's JSON path can name as one quoted label (``$."user id"``): no
# quote, no backslash, no control character (stored escaped, they never match)
_FILTER_KEY = re.compile(r'^[^"\\\x00-\x1f]+$')


def blob_hash(tag: str, data: bytes) -> bytes:
    """Content address of a serialized value: blake2b-128 over ``tag + b"\\0" +
    data`` (one call on a joined buffer: cheaper than three incremental ones)."""
    prefix = _PREFIXES.get(tag)
    if prefix is None:
        if len(_PREFIXES) > 1024:
            _PREFIXES.clear()
        prefix = _PREFIXES[tag] = tag.encode() + b"\0"
    return blake2b(prefix + data, digest_size=HASH_SIZE).digest()


_PREFIXES: dict[str, bytes] = {}


def pack(hashes: Any) -> bytes:
    """Hashes back to back (the ``hashes``/``children`` column format)."""
    return b"".join(hashes)


def unpack(packed: bytes) -> tuple[bytes, ...]:
    """Inverse of :func:`pack`."""
    return tuple(packed[i : i + HASH_SIZE] for i in range(0, len(packed), HASH_SIZE))


_KEYS: dict[Any, str] = {}


def version_key(version: str | int | float) -> str:
    """Memoized :func:`_version_key` (the same versions recur every step)."""
    if type(version) is not str:
        return _version_key(version)
    key = _KEYS.get(version)
    if key is None:
        if len(_KEYS) > 65536:
            _KEYS.clear()
        packed = _packed_get(version)  # put packed it just before: the counter is parsed
        if type(packed) is tuple:
            key = _KEYS[version] = f"{packed[0]}{version[32:]}"
        else:
            key = _KEYS[version] = _version_key(version)
    return key


def _version_key(version: str | int | float) -> str:
    """Short, injective text key of a channel version (refs are keyed by it).

    ``"000…0007.0.123"`` -> ``"7.0.123"``; any other version -> ``"=" + str(v)``
    (a standard key starts with a digit, so the two forms never collide).
    """
    if type(version) is str and len(version) > 33 and version[32] == ".":
        head = version[:32]
        if head.isascii() and head.isdigit():  # ("²", "٧" are digits too)
            return f"{int(head)}{version[32:]}"
    return f"={version}"


def dump_metadata(config: Mapping[str, Any], metadata: Mapping[str, Any]) -> tuple[str, Any]:
    """Stored metadata (JSON text) and its run_id, after the contract's filtering.

    The runtime's own metadata (``{"source", "step", "parents"}`` in that order,
    no user metadata or run_id in the config) is formatted directly: the same
    text the JSON encoder gives (a hypothesis test compares the two), without
    the filtering copy and an encoder per call (every saved step has one)."""
    if type(metadata) is dict and len(metadata) == 3 and not config.get("metadata"):
        configurable = config.get("configurable")
        if not configurable or "run_id" not in configurable:
            text = _standard_text(metadata)
            if text is not None:
                return text, None
    return _dump_general(config, metadata)


def _standard_text(metadata: dict[str, Any]) -> str | None:
    """JSON of ``{"source": str, "step": int, "parents": {str: str}}`` as
    :func:`_dump_general` writes it, or None for any other shape."""
    (k1, source), (k2, step), (k3, parents) = metadata.items()
    if not (
        k1 == "source"
        and k2 == "step"
        and k3 == "parents"
        and type(source) is str
        and type(step) is int
        and type(parents) is dict
    ):
        return None
    if parents:
        items = []
        for key, value in parents.items():
            if type(key) is not str or type(value) is not str:
                return None
            items.append(f"{_encode_str(key)}:{_encode_str(value)}")
        inner = ",".join(items)
    else:
        inner = ""
    source = _encode_str(source.replace("\u0000", ""))
    return f'{{"source":{source},"step":{step},"parents":{{{inner}}}}}'


def _dump_general(config: Mapping[str, Any], metadata: Mapping[str, Any]) -> tuple[str, Any]:
    md = get_checkpoint_metadata(config, metadata)  # type: ignore[arg-type]
    check_metadata(md)
    if "writes" in md:  # legacy, display only (LangGraph < 0.3 threads brought over)
        md["writes"] = _finite(md["writes"])  # type: ignore[typeddict-item]
    text = "".join(_encoder()(md, 0))
    run_id = md.get("run_id")
    return text, (str(run_id) if run_id is not None else None)


_JSON_SCALARS = (str, int, float, bool, type(None))


def _check_json(value: Any, path: str, depth: int) -> None:
    """Refuse a metadata value JSON cannot hold as it is: stored as its text (a
    ``datetime`` read back as a ``str``, an object as its repr), it would come
    back a different type without a word. LangGraph's SQL savers raise a bare
    ``TypeError`` for it."""
    if isinstance(value, _JSON_SCALARS):
        if type(value) is float and not math.isfinite(value):
            raise SerializationError(
                f"checkpoint metadata at {path} is {value}, which JSON cannot hold (stored, it "
                "would break every metadata filter of the saver); store it as a str or None",
                path=path,
                type_name="float",
            )
        return
    if depth > 200:
        raise SerializationError(f"checkpoint metadata at {path} is nested too deeply", path=path)
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]", depth + 1)
        return
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, _JSON_SCALARS):
                raise SerializationError(
                    f"checkpoint metadata at {path} has a {type(k).__name__} key {k!r}: "
                    "metadata is stored as JSON, whose keys are strings",
                    path=path,
                    type_name=type(k).__name__,
                )
            _check_json(item, f"{path}.{k}", depth + 1)
        return
    name = type(value).__name__
    raise SerializationError(
        f"checkpoint metadata at {path} is a {name}: metadata is stored as JSON, which holds "
        "str, int, float, bool, None, lists and dicts; store a plain value (e.g. "
        "datetime.isoformat()) or keep the object in the graph's state",
        path=path,
        type_name=name,
    )


def check_metadata(md: Mapping[str, Any]) -> None:
    """Refuse metadata JSON cannot hold as it is (:func:`_check_json`); the
    legacy ``writes`` key is display-only and stored as text where it must be."""
    for key, value in md.items():
        if key != "writes":
            _check_json(value, key, 0)


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as their text (JSON has neither)."""
    if type(value) is float and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def _encoder() -> Any:
    """The C JSON encoder ``json.dumps(..., ensure_ascii=False, separators=(",",
    ":"))`` builds, made directly (no per-call Python layers)."""
    if _c_make_encoder is None:  # pragma: no cover  (no C accelerator)
        return lambda obj, _: [_ENCODER.encode(obj)]
    return _c_make_encoder({}, _json_default, _encode_str, None, ":", ",", False, False, True)


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_json_default)


_scan = json.scanner.make_scanner(json.JSONDecoder())  # the C scanner json.loads ends in


def load_metadata(text: str, thread_id: str, checkpoint_id: str) -> dict[str, Any]:
    """Parse stored metadata, naming the checkpoint when it is not JSON.

    Every listed checkpoint parses one: the scanner is called directly (no
    Python layers of ``json.loads``) when it consumes the whole text, which is
    what the saver writes; anything else goes through ``json.loads``, so what
    is accepted or refused does not change."""
    if type(text) is str:
        try:
            value, end = _scan(text, 0)
        except (StopIteration, ValueError):
            pass
        else:
            if end == len(text) and type(value) is dict:
                return value
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise CorruptBlobError(
            f"checkpoint metadata is not JSON: {exc}",
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
        ) from exc
    if type(value) is not dict:  # every reader of metadata takes it for a dict
        raise CorruptBlobError(
            f"checkpoint metadata is not a JSON object ({type(value).__name__})",
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
        )
    return value


def metadata_matches(metadata: str, pairs: tuple[tuple[str, str], ...]) -> bool:
    """Whether stored metadata (JSON text) passes a ``list(filter=...)``: every
    key equal to its value, ``True`` not equal to ``1``. A ``None`` value also
    matches a missing key, as LangGraph's in-memory and SQLite savers match it
    (the SQL backends say the same in SQL)."""
    md = json.loads(metadata)
    for key, value in pairs:
        expected = json.loads(value)
        actual = md.get(key)
        if actual != expected or (type(actual) is bool) is not (type(expected) is bool):
            return False
    return True


def filter_pairs(filter: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """Validated ``(key, json_value)`` pairs for :class:`ListCheckpoints`.

    A key is one top-level metadata key, matched literally (``"a.b"`` is the
    key ``a.b``, not a path). It may hold any character but a double quote, a
    backslash or a control character (it ends up in a JSON path; values are
    always bound as parameters), else :class:`ConfigError`.
    """
    if not filter:
        return ()
    pairs = []
    for key, value in filter.items():
        if not isinstance(key, str) or not _FILTER_KEY.match(key):
            raise ConfigError(
                f"invalid metadata filter key {key!r}: a key is a non-empty str without"
                " double quotes, backslashes or control characters"
            )
        pairs.append((key, json.dumps(value, ensure_ascii=False, separators=(",", ":"))))
    return tuple(pairs)

"""Task ids, task paths and interrupt ids: byte-for-byte LangGraph's.

A task id is a hash of the checkpoint id the step starts from, the task's
namespace, the step and what triggered it. Re-planning the same step from the
same checkpoint gives the same ids, which is how a resumed run recognises the
tasks that already finished (their writes are stored under those ids).
"""

from __future__ import annotations

import binascii
from hashlib import sha1
from typing import Any

from xxhash import xxh3_128_hexdigest

from threadloom.constants import NS_SEP, PULL
from threadloom.types import interrupt_id  # one definition, shared with Interrupt.from_ns

__all__ = [
    "checkpoint_id_bytes",
    "interrupt_id",
    "task_id",
    "task_id_v1",
    "task_path_str",
]


def checkpoint_id_bytes(checkpoint_id: str) -> bytes:
    """The 16 raw bytes of a checkpoint id: the namespace of every task id in its step."""
    return binascii.unhexlify(checkpoint_id.replace("-", ""))


def _fmt(hexdigest: str) -> str:
    return f"{hexdigest[:8]}-{hexdigest[8:12]}-{hexdigest[12:16]}-{hexdigest[16:20]}-{hexdigest[20:32]}"


def task_id(namespace: bytes, *parts: str) -> str:
    """xxh3-128 of ``namespace + parts`` formatted like a UUID (checkpoint format v>1).

    PULL: ``(ns, step, name, "__pregel_pull", *sorted(triggers))``;
    Send: ``(ns, step, node, "__pregel_push", str(idx))``; ``ns`` is the node's
    checkpoint namespace (``parent|name`` or ``name``).
    """
    return _fmt(xxh3_128_hexdigest(namespace + "".join(parts).encode()))


def task_id_v1(namespace: bytes, *parts: str) -> str:
    """SHA-1 variant used by checkpoints of format v1."""
    sha = sha1(namespace, usedforsecurity=False)
    sha.update("".join(parts).encode())
    return _fmt(sha.hexdigest())


def task_path_str(tup: Any) -> str:
    """Sortable string form of a task path: ``~__pregel_push, 0000000001, False``."""
    if type(tup) is tuple and len(tup) == 2 and tup[0] is PULL and type(tup[1]) is str:
        return _PULL_PREFIX + tup[1]  # a PULL task's path (every step has some): no recursion
    if isinstance(tup, (tuple, list)):
        return "~" + ", ".join(task_path_str(x) for x in tup)
    if isinstance(tup, int):
        return f"{tup:010d}"
    return str(tup)


_PULL_PREFIX = f"~{PULL}, "


def recast_checkpoint_ns(ns: str) -> str:
    """``a:tid|b:tid|1`` -> ``a|b``: the namespace without task ids and counters."""
    return NS_SEP.join(part.split(":")[0] for part in ns.split(NS_SEP) if not part.isdigit())

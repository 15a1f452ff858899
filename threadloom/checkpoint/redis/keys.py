"""Redis key layout: every key of a thread lives in one cluster hash slot.

Each key starts with the hash tag ``{<prefix>:<thread>}``, so Redis Cluster (and
Valkey, and proxies that speak the cluster protocol) puts all of a thread's
keys in one slot, and a MULTI/EXEC or Lua script over them never raises
CROSSSLOT. The price is that blobs are content-addressed *per thread*: two
threads storing the same value store it twice, because a blob key shared
across threads would live in another slot than at least one of them.
Deduplication inside a thread (where nearly all repetition is: unchanged
channels, replayed forks, appended message lists) is kept.

Layout (``T`` = ``{prefix:thread}``, ``ns`` = checkpoint namespace)::

    T:ns                  SET    namespaces the thread has
    T:ck:<ns>             ZSET   checkpoint ids, all score 0 (lexical = time order)
    T:row:<ns>            HASH   checkpoint id -> packed checkpoint row
    T:w:<ns>:<id>         HASH   "task_id\\x00idx" -> packed pending write
    T:blob                HASH   content hash -> stored blob
    T:ref                 HASH   packed ref key -> packed ref row (if the core uses refs)

The only cross-thread key is ``{prefix}:threads`` (a SET of thread ids), used
by operator commands that enumerate threads (``stats()``, ``delete_for_runs``);
it is optional for correctness and lives in its own slot.

Thread ids and namespaces are escaped so no caller value can end the hash tag
early or make two different keys equal (``%``, ``{``, ``}`` become ``%25``,
``%7B``, ``%7D``).
"""

from __future__ import annotations

from binascii import crc_hqx

__all__ = [
    "KeyLayout",
    "key_slot",
    "escape",
    "unescape",
]

CLUSTER_SLOTS = 16384


def key_slot(key: str | bytes) -> int:
    """The Redis Cluster slot of ``key`` (CRC16/XMODEM of the hash tag, mod 16384)."""
    raw = key.encode() if isinstance(key, str) else key
    start = raw.find(b"{")
    if start >= 0:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            raw = raw[start + 1 : end]
    return crc_hqx(raw, 0) % CLUSTER_SLOTS


def escape(value: str) -> str:
    """Make ``value`` safe inside a hash tag and unambiguous inside a key."""
    return value.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")


def unescape(value: str) -> str:
    """Inverse of :func:`escape`."""
    return value.replace("%7D", "}").replace("%7B", "{").replace("%25", "%")


class KeyLayout:
    """Builds every key for one ``key_prefix``.

    Args:
        prefix: namespace for all keys, so several apps (or test runs) can share
            one Redis database; must not contain ``{`` or ``}``.
    """

    def __init__(self, prefix: str = "threadloom") -> None:
        if not prefix or "{" in prefix or "}" in prefix:
            raise ValueError(f"key_prefix must be non-empty without braces, got {prefix!r}")
        self.prefix = prefix

    def tag(self, thread_id: str) -> str:
        """``{prefix:thread}``: the shared hash tag of a thread's keys."""
        return f"{{{self.prefix}:{escape(thread_id)}}}"

    def namespaces(self, thread_id: str) -> str:
        return f"{self.tag(thread_id)}:ns"

    def checkpoints(self, thread_id: str, ns: str) -> str:
        return f"{self.tag(thread_id)}:ck:{escape(ns)}"

    def rows(self, thread_id: str, ns: str) -> str:
        return f"{self.tag(thread_id)}:row:{escape(ns)}"

    def writes(self, thread_id: str, ns: str, checkpoint_id: str) -> str:
        return f"{self.tag(thread_id)}:w:{escape(ns)}:{checkpoint_id}"

    def blobs(self, thread_id: str) -> str:
        return f"{self.tag(thread_id)}:blob"

    def refs(self, thread_id: str) -> str:
        return f"{self.tag(thread_id)}:ref"

    def threads(self) -> str:
        """The one cross-thread key: the set of thread ids (for operator commands)."""
        return f"{{{self.prefix}}}:threads"

    def thread_pattern(self) -> str:
        """SCAN pattern for every key under this prefix (tests, cleanup)."""
        return f"{{{_glob_escape(self.prefix)}*"


def _glob_escape(value: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in value)

"""Moving a store to another key prefix (for prefixes a newer version refuses).

Since session 8 a ``key_prefix`` may not contain ``:`` (prefix ``a`` + thread
``b:c`` and prefix ``a:b`` + thread ``c`` shared keys), so a store written
under such a prefix can no longer be opened. :func:`move_prefix` renames its
keys to an allowed prefix; nothing else in a key changes (the layout is the
same), so the savers read the moved store as it was.

Keys are copied with ``DUMP``/``RESTORE`` (which keeps each key's remaining
TTL) and then deleted, because the new name hashes to another cluster slot,
where ``RENAME`` is refused. Run it with no saver writing under either prefix.
The short-lived op keys of recent writes (:mod:`.once`) are deleted, not
moved: only a call re-sent while it runs would read one, and none runs during
a move. A marker key under the new prefix names the move until it is done, so a move
that stopped midway is finished by running it again (and told apart from a
prefix some saver already writes under, which is refused).
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import RedisError

from threadloom.checkpoint.redis.keys import KeyLayout
from threadloom.errors import ConfigError, StorageError

__all__ = ["move_prefix"]


def _glob(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def move_prefix(client: Any, old: str, new: str) -> int:
    """Move every key stored under prefix ``old`` to prefix ``new``; returns keys moved.

    ``client``: a sync ``redis.Redis`` or ``RedisCluster`` with
    ``decode_responses=False``. ``new`` must be an allowed prefix (checked
    first). Refuses, moving nothing, when a key under ``new`` exists that an
    unfinished move from ``old`` did not put there (op keys alone, left by
    threads deleted in the last minutes, do not count). A move that stopped
    midway (a lost connection: :class:`StorageError`) is finished by calling
    it again: a key already at its new name is kept and its old copy dropped.
    If ``old`` plus ``:`` starts another prefix you used (``a:b`` and ``a``
    with a thread ``b:...``), those keys were already shared and move too.
    """
    KeyLayout(new)  # raises ConfigError for a prefix the savers would refuse
    if not old or "{" in old or "}" in old:
        raise ConfigError(f"move_prefix: old prefix must be non-empty without braces, got {old!r}")
    try:
        return _move(client, old, new)
    except RedisError as exc:
        raise StorageError(
            f"move_prefix({old!r} -> {new!r}) stopped: {type(exc).__name__}: {exc}; "
            "call it again to finish the move"
        ) from exc


def _move(client: Any, old: str, new: str) -> int:
    """The marker ``{new}:moving-from`` (= ``old``) stays until every key moved,
    so a second call knows the keys under ``new`` are this move's own."""
    marker = f"{{{new}}}:moving-from".encode()
    mark = client.get(marker)
    if mark is None:
        # op keys alone (a deleted thread's recent writes, once.py) are no data
        found = client.scan_iter(match=f"{{{_glob(new)}[:}}]*", count=1000)
        if any(b"}:op:" not in key for key in found):
            raise ConfigError(
                f"move_prefix: keys under prefix {new!r} exist already; nothing moved"
            )
        client.set(marker, old.encode())
    elif mark != old.encode():
        raise ConfigError(
            f"move_prefix: prefix {new!r} holds an unfinished move from "
            f"{mark.decode(errors='replace')!r}; finish that one first"
        )
    threads, head = f"{{{old}}}:threads".encode(), f"{{{old}:".encode()
    moves: list[tuple[bytes, bytes]] = []
    for key in client.scan_iter(match=f"{{{_glob(old)}[:}}]*", count=1000):
        if b"}:op:" in key:  # a recent write's reply (once.py): only a re-send reads it
            client.delete(key)
        elif key == threads:
            moves.append((key, f"{{{new}}}:threads".encode()))
        elif key.startswith(head):
            moves.append((key, f"{{{new}:".encode() + key[len(head) :]))
    for key, target in moves:
        if not client.exists(target):  # else moved by the stopped call: keep it
            dumped, left = client.dump(key), client.pttl(key)
            if dumped is None or left == -2:  # expired meanwhile
                continue
            client.restore(target, max(left, 0), dumped)
        client.delete(key)
    client.delete(marker)
    return len(moves)

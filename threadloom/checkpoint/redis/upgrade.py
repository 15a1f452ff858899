"""Moving a store to another key prefix (for prefixes a newer version refuses).

Since session 8 a ``key_prefix`` may not contain ``:`` (prefix ``a`` + thread
``b:c`` and prefix ``a:b`` + thread ``c`` shared keys), so a store written
under such a prefix can no longer be opened. :func:`move_prefix` renames its
keys to an allowed prefix; nothing else in a key changes (the layout is the
same), so the savers read the moved store as it was.

Keys are copied with ``DUMP``/``RESTORE`` (which keeps each key's remaining
TTL) and then deleted, because the new name hashes to another cluster slot,
where ``RENAME`` is refused. Run it with no saver writing under either prefix.
"""

from __future__ import annotations

from typing import Any

from threadloom.checkpoint.redis.keys import KeyLayout
from threadloom.errors import ConfigError

__all__ = ["move_prefix"]


def _glob(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def move_prefix(client: Any, old: str, new: str) -> int:
    """Move every key stored under prefix ``old`` to prefix ``new``; returns keys moved.

    ``client``: a sync ``redis.Redis`` or ``RedisCluster`` with
    ``decode_responses=False``. ``new`` must be an allowed prefix (checked
    first). Refuses, moving nothing, when a key under ``new`` exists. If
    ``old`` plus ``:`` starts another prefix you used (``a:b`` and ``a``
    with a thread ``b:...``), those keys were already shared and move too.
    """
    KeyLayout(new)  # raises ConfigError for a prefix the savers would refuse
    if not old or "{" in old or "}" in old:
        raise ConfigError(f"move_prefix: old prefix must be non-empty without braces, got {old!r}")
    if any(client.scan_iter(match=f"{{{_glob(new)}[:}}]*", count=1000)):
        raise ConfigError(f"move_prefix: keys under prefix {new!r} exist already; nothing moved")
    threads, head = f"{{{old}}}:threads".encode(), f"{{{old}:".encode()
    moves: list[tuple[bytes, bytes]] = []
    for key in client.scan_iter(match=f"{{{_glob(old)}[:}}]*", count=1000):
        if key == threads:
            moves.append((key, f"{{{new}}}:threads".encode()))
        elif key.startswith(head):
            moves.append((key, f"{{{new}:".encode() + key[len(head) :]))
    for key, target in moves:
        dumped, left = client.dump(key), client.pttl(key)
        if dumped is None or left == -2:  # expired meanwhile
            continue
        client.restore(target, max(left, 0), dumped)
        client.delete(key)
    return len(moves)

"""The demo's SQLite file: recreated on every run, but only if the demo made it.

``threadloom demo --db PATH`` starts from an empty file. Deleting whatever sits
at PATH destroyed a real checkpoint database once (pointed at ``state.db``), so
the demo stamps its file (SQLite's ``application_id`` header field) and
replaces only a stamped file, a missing one, or anything when ``force`` is set.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from threadloom.errors import ConfigError

__all__ = ["DEMO_APPLICATION_ID", "DemoFileRefused", "is_demo_db", "prepare_db"]

# "TlDm": written into the header of every file the demo creates
DEMO_APPLICATION_ID = 0x546C446D

_SIDE_FILES = ("-wal", "-shm", "-journal")
_MAGIC = b"SQLite format 3\x00"
_HEADER_SIZE = 100  # application_id: big-endian 4 bytes at offset 68


class DemoFileRefused(ConfigError):
    """``--db`` names something the demo did not create; nothing was touched."""


def is_demo_db(path: str) -> bool:
    """True if ``path`` is a SQLite file the demo created.

    Reads the 100-byte file header only (no SQLite connection: nothing is
    created beside a file that may not be ours). The demo writes its stamp
    before the file switches to WAL, so it is always in the main file.
    """
    try:
        with open(path, "rb") as f:
            header = f.read(_HEADER_SIZE)
    except OSError:
        return False
    return (
        len(header) == _HEADER_SIZE
        and header.startswith(_MAGIC)
        and int.from_bytes(header[68:72], "big") == DEMO_APPLICATION_ID
    )


def prepare_db(path: str, force: bool = False) -> None:
    """Delete a previous demo file at ``path`` (and its -wal/-shm files), then
    create an empty stamped one.

    Raises:
        DemoFileRefused: ``path`` is a directory, or an existing file the demo
            did not create and ``force`` is false.
    """
    target = Path(path)
    if target.is_dir():
        raise DemoFileRefused(f"--db {path!r} is a directory; give a file path")
    if target.exists() and not force and not is_demo_db(path):
        raise DemoFileRefused(
            f"--db {path!r} exists and is not a threadloom demo database (it may hold real"
            " threads); the demo deletes and recreates its file, so choose another path,"
            " or pass --force to delete it"
        )
    # side files without their database are stale: SQLite could replay a
    # leftover -wal into the new file
    for suffix in ("", *_SIDE_FILES):
        Path(path + suffix).unlink(missing_ok=True)
    try:
        conn = sqlite3.connect(path)
    except sqlite3.Error as exc:  # e.g. its directory does not exist
        raise DemoFileRefused(f"--db {path!r} cannot be created: {exc}") from None
    try:
        conn.execute(f"PRAGMA application_id = {DEMO_APPLICATION_ID}")
        conn.commit()
    finally:
        conn.close()

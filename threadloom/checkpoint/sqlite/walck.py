"""WAL checkpoints off the committing thread, for a file the saver opened itself.

SQLite copies the WAL back into the database (a checkpoint) inside the COMMIT
that pushes the WAL past ``wal_autocheckpoint`` pages (1,000). At
``synchronous=NORMAL`` that COMMIT then pays two fdatasyncs (the WAL, ~4 MB
unsynced, then the database): 1-5 ms here, about 20 us per step of a 10-node
chain on average. A :class:`WalCheckpointer` runs ``PRAGMA
wal_checkpoint(PASSIVE)`` on a second connection in a short-lived thread once
``every`` rows were written (``total_changes``; a row dirties a page or less)
instead; ``sqlite3`` releases the GIL while it runs, so the fsyncs overlap the
run's work. The foreground auto-checkpoint still runs when the WAL reaches
1,000 pages (a checkpoint racing the writer cannot let the WAL restart), but
finds the WAL synced and most pages copied: its fsyncs are short. Durability is unchanged (a checkpoint only
copies committed frames), the auto-checkpoint stays on as the fallback when a
burst of large commits outruns it, and a failed background checkpoint is
simply retried later (PASSIVE never blocks writers or readers). The second
connection runs at ``synchronous = FULL`` whatever the build default (a
checkpoint syncs the WAL before copying and the file after unless OFF). A thread
that cannot start is skipped: a committed write never raises because of it.
"""

from __future__ import annotations

import sqlite3
import threading

__all__ = ["WalCheckpointer", "EVERY"]

# rows written between background checkpoints: a row dirties a page or less,
# so one runs before the WAL reaches 1,000 pages; every checkpoint costs an
# fdatasync and recopies the pages rewritten since the last, so fewer is less
# CPU (chain, 3,000 steps: 256 -> 512 took 31 -> 16 runs, 837 -> 627 page
# copies, 76 -> 61 fdatasyncs, background CPU 6.1-8.8 -> 4.5-4.8 us per step;
# the foreground auto-checkpoint copied 21 -> 26 pages each WAL cycle)
EVERY = 512


class WalCheckpointer:
    """Background PASSIVE checkpoints of the database file at ``path``."""

    def __init__(self, path: str, every: int = EVERY) -> None:
        self.path = path
        self.every = every
        self.last = 0  # total_changes at the last trigger
        self.runs = 0  # checkpoints run (tests, stats)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    def committed(self, changes: int) -> None:
        """A write commit on the saver's connection (its lock is held);
        ``changes``: the connection's ``total_changes`` after it."""
        if changes - self.last < self.every:
            return
        self.last = changes
        with self._lock:
            if self._closed or (self._thread is not None and self._thread.is_alive()):
                return
            thread = threading.Thread(target=self._checkpoint, daemon=True, name="threadloom-walck")
            try:
                thread.start()
            except RuntimeError:
                return  # no thread to spare: the auto-checkpoint does it (an optimisation)
            self._thread = thread  # only a started thread: close() joins it

    def _checkpoint(self) -> None:
        try:
            with self._lock:
                if self._closed:
                    return
                if self._conn is None:
                    conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
                    # its own level decides whether the checkpoint syncs the WAL
                    # before copying frames and the file after (a build default
                    # of OFF would lose committed data in an OS crash)
                    try:
                        conn.execute("PRAGMA synchronous = FULL")
                    except sqlite3.Error:
                        conn.close()
                        raise
                    self._conn = conn
                conn = self._conn
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.runs += 1
        except sqlite3.Error:
            pass  # the auto-checkpoint still runs; the next trigger retries

    def close(self) -> None:
        """Wait for a running checkpoint, then close the second connection."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None:
            thread.join()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

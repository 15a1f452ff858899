"""One daemon thread renews every sync run's lease, only when a renewal is due.

A run's fenced writes already extend its lease (see :mod:`.ops`), so for runs
whose steps are short the renewer never has anything to do; it only matters
during steps longer than a third of the TTL. One shared thread instead of a
thread per run keeps ``invoke`` cheap.
"""

from __future__ import annotations

import threading
import time
from typing import Any

__all__ = ["RENEWER", "Renewer"]


class Renewer:
    """Renews registered leases when ``lease.due`` (monotonic seconds) passes."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._leases: set[Any] = set()
        self._thread: threading.Thread | None = None
        # when the waiting thread wakes next (inf: not waiting); add() wakes it only
        # when the new lease falls due before that: no thread switch per run
        self._wake_at = float("inf")
        self._renewing: Any = None  # the lease being renewed right now (remove waits)

    def add(self, lease: Any) -> None:
        with self._cond:
            self._leases.add(lease)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="threadloom-lease-renewer", daemon=True
                )
                self._thread.start()
            if lease.due < self._wake_at:
                self._cond.notify()

    def remove(self, lease: Any) -> None:
        """Stop renewing ``lease``; if a renewal of it is running, wait for it to
        end: the run's saver may be closed right after this returns, and a
        renewal still using its connection then (SQLite) could crash the process."""
        with self._cond:
            self._leases.discard(lease)
            if threading.current_thread() is not self._thread:
                while self._renewing is lease:
                    self._cond.wait()

    def _loop(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                due = [x for x in self._leases if x.due <= now]
                if not due:
                    wait = max(0.001, min((x.due for x in self._leases), default=now + 5.0) - now)
                    self._wake_at = now + wait
                    self._cond.wait(wait)
                    self._wake_at = float("inf")
                    continue
            for lease in due:
                with self._cond:
                    if lease not in self._leases:  # removed since it fell due
                        continue
                    self._renewing = lease
                lease.touch()  # next renewal a period from now, whatever happens
                try:
                    lease.renew()
                except Exception:  # storage hiccup: the next fenced write decides
                    pass
                finally:
                    with self._cond:
                        self._renewing = None
                        self._cond.notify_all()
                if lease.lost:
                    self.remove(lease)


RENEWER = Renewer()

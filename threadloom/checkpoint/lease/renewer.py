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
        with self._cond:
            self._leases.discard(lease)

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
                lease.touch()  # next renewal a period from now, whatever happens
                try:
                    lease.renew()
                except Exception:  # storage hiccup: the next fenced write decides
                    pass
                if lease.lost:
                    self.remove(lease)


RENEWER = Renewer()

"""A run ending (and its saver closing) while the shared renewer thread is
renewing the run's lease: CI crashed with a segfault when a SQLite saver's
connection was closed under the renewal's transaction (session 9). Now the
run's ``halt`` waits for a renewal of its lease in flight, and a SQLite
saver closes its connection only between transactions."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from threadloom.checkpoint.lease.renewer import Renewer
from threadloom.checkpoint.sqlite import SqliteSaver


class _SlowLease:
    def __init__(self) -> None:
        self.due = 0.0
        self.lost = False
        self.started = threading.Event()
        self.go_on = threading.Event()
        self.renewed = False

    def touch(self) -> None:
        self.due = time.monotonic() + 60

    def renew(self) -> None:
        self.started.set()
        self.go_on.wait(5)
        self.renewed = True


def test_remove_waits_for_the_renewal_in_flight() -> None:
    renewer, lease = Renewer(), _SlowLease()
    renewer.add(lease)
    assert lease.started.wait(5)
    removed = threading.Event()
    remover = threading.Thread(target=lambda: (renewer.remove(lease), removed.set()))
    remover.start()
    assert not removed.wait(0.2)  # still renewing: remove waits
    lease.go_on.set()
    assert removed.wait(5) and lease.renewed
    remover.join(5)


def test_a_removed_lease_is_not_renewed_after_all() -> None:
    renewer, lease = Renewer(), _SlowLease()
    lease.due = time.monotonic() + 0.3
    renewer.add(lease)
    renewer.remove(lease)
    time.sleep(0.5)
    assert not lease.started.is_set()


def test_close_waits_for_a_transaction_in_another_thread(tmp_path: Path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "s.db")) as saver:
        in_tx, release = threading.Event(), threading.Event()

        def hold() -> None:
            with saver.executor.transaction(True):
                in_tx.set()
                release.wait(5)

        holder = threading.Thread(target=hold)
        holder.start()
        assert in_tx.wait(5)
        closed = threading.Event()
        closer = threading.Thread(target=lambda: (saver.close(), closed.set()))
        closer.start()
        assert not closed.wait(0.2)  # the transaction still runs on the connection
        release.set()
        holder.join(5)
        assert closed.wait(5)
        closer.join(5)

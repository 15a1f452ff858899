"""Round trips per call, counted by a TCP relay between the saver and the server.

A round trip is the client speaking after having heard the server. Pinning the
counts keeps the pipelining honest: psycopg's ``transaction()`` inside a
pipeline, for instance, would silently add three syncs to every put. The relay
also keeps what the client sent, so the tests can check that a write on an
autocommit connection sends no BEGIN/COMMIT statement (the pipeline's Sync
commits it).
"""

from __future__ import annotations

import os
import select
import socket
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg.rows import dict_row

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.ids import next_version
from threadloom.checkpoint.postgres import PostgresSaver

pytestmark = pytest.mark.postgres

# a cold read: the checkpoint row(s), the keyframe ancestors of a diff record,
# the refs, the pending writes, the blobs of values and writes; a re-read (refs
# and blobs cached): the row and the pending writes; right after a put_writes
# that made a blob, also that blob
GET_LATEST_TRIPS, GET_BY_ID_TRIPS, LIST_TRIPS = 5, 5, 5
REREAD_TRIPS, GET_AFTER_WRITE_TRIPS = 2, 3


class Relay:
    """Forwards one port to the server and counts client turns."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.turns = 0
        self.sent = bytearray()  # everything the client sent since the last count()
        self._last = "server"
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        with client, server:
            while True:
                ready, _, _ = select.select([client, server], [], [])
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    if sock is client:
                        self.turns += self._last == "server"
                        self._last = "client"
                        self.sent += data
                        server.sendall(data)
                    else:
                        self._last = "server"
                        client.sendall(data)

    def count(self, fn, *args):
        """(round trips, result) of ``fn(*args)``."""
        self.turns = 0
        self.sent.clear()
        result = fn(*args)
        return self.turns, result


def relay_url(pg_url: str) -> tuple[str, Relay]:
    """A URL reaching the server of ``pg_url`` through a new counting relay."""
    parts = urlsplit(pg_url)
    relay = Relay(parts.hostname or "127.0.0.1", parts.port or 5432)
    user = f"{parts.username}@" if parts.username else ""
    url = urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{relay.port}"))
    return url + "?sslmode=disable", relay


@pytest.fixture
def relayed(pg_url: str, pg_schema: str) -> Iterator[tuple[PostgresSaver, Relay]]:
    url, relay = relay_url(pg_url)
    with PostgresSaver.from_conn_string(url, schema=pg_schema) as saver:
        saver.setup()
        yield saver, relay
    relay.listener.close()


def test_put_put_writes_and_put_step_cost_one_round_trip(relayed) -> None:
    """Optimistic (postgres/optimistic.py): every statement travels with the Sync."""
    saver, relay = relayed
    parent = {"configurable": {"thread_id": "rtt", "checkpoint_ns": ""}}
    for i in range(3):
        cp = empty_checkpoint()
        versions = {"messages": str(i + 1), "doc": str(i + 1)}
        cp["channel_values"] = {"messages": list(range(i + 1)), "doc": "x" * (300 + i)}
        cp["channel_versions"] = versions
        put, parent = relay.count(saver.put, parent, cp, {"step": i}, versions)
        writes, _ = relay.count(saver.put_writes, parent, [("messages", [i])], f"t{i}")
        assert (put, writes) == (1, 1)
        assert b"BEGIN" not in relay.sent and b"COMMIT" not in relay.sent
    for i in range(3, 6):  # a step: a task's writes (one a blob) and the next checkpoint
        cp = empty_checkpoint()
        versions = {"messages": str(i + 1), "doc": str(i + 1)}
        cp["channel_values"] = {"messages": list(range(i + 1)), "doc": "x" * (300 + i)}
        cp["channel_versions"] = versions
        writes = [(parent, [("doc", os.urandom(600).hex()), ("n", i)], f"t{i}", "")]
        step, parent = relay.count(saver.put_step, writes, (parent, cp, {"step": i}, versions))
        assert step == 1
    tup = saver.get_tuple(parent)
    assert tup is not None and tup.checkpoint["channel_values"]["doc"] == "x" * 305


def test_reads_cost_one_round_trip_per_operation(relayed) -> None:
    saver, relay = relayed
    config = {"configurable": {"thread_id": "rtt-read", "checkpoint_ns": ""}}
    version = None
    for i in range(3):
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": ["m" * 400] * (i + 1)}  # a blob per value
        version = next_version(version)  # the runtime's: ref rows are cached only for these
        cp["channel_versions"] = {"messages": version}
        config = saver.put(config, cp, {"step": i}, {"messages": version})
    saver.put_writes(config, [("messages", ["w" * 400])], "task")
    latest = {"configurable": {"thread_id": "rtt-read", "checkpoint_ns": ""}}

    def fresh() -> PostgresSaver:  # a saver with empty read caches
        return PostgresSaver(saver.connector.conn, schema=saver.sql.schema)

    get, got = relay.count(fresh().get_tuple, latest)
    assert got is not None and got.pending_writes
    by_id, _ = relay.count(fresh().get_tuple, config)
    listed, items = relay.count(lambda: list(fresh().list(latest, limit=2)))
    assert len(items) == 2
    warm = fresh()
    warm.get_tuple(latest)
    again, _ = relay.count(warm.get_tuple, latest)
    assert again == REREAD_TRIPS
    assert (get, by_id, listed) == (GET_LATEST_TRIPS, GET_BY_ID_TRIPS, LIST_TRIPS)


def test_bench_style_connection_round_trips(pg_url: str, pg_schema: str) -> None:
    """autocommit, prepare_threshold=0 (statements prepared on first use), dict rows."""
    url, relay = relay_url(pg_url)
    conn = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    with conn:
        saver = PostgresSaver(conn, schema=pg_schema)
        saver.setup()
        parent = {"configurable": {"thread_id": "rtt-bench", "checkpoint_ns": ""}}
        counts = []
        for i in range(4):  # the first one prepares every statement
            cp = empty_checkpoint()
            cp["channel_values"] = {"doc": f"{i} " + "x" * 2000}  # a blob
            cp["channel_versions"] = {"doc": str(i + 1)}
            put, parent = relay.count(saver.put, parent, cp, {"step": i}, {"doc": str(i + 1)})
            big = [("doc", os.urandom(1500).hex())]  # incompressible: a blob
            writes, _ = relay.count(saver.put_writes, parent, big, f"t{i}")
            get, _ = relay.count(saver.get_tuple, parent)
            counts.append((put, writes, get))
        assert b"COMMIT" not in relay.sent
    relay.listener.close()
    # put and put_writes: every statement with the Sync (optimistic)
    assert counts[1:] == [(1, 1, GET_AFTER_WRITE_TRIPS)] * 3

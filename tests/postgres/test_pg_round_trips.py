"""Round trips per call, counted by a TCP relay between the saver and the server.

A round trip is the client speaking after having heard the server. Pinning the
counts keeps the pipelining honest: psycopg's ``transaction()`` inside a
pipeline, for instance, would silently add three syncs to every put.
"""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from threadloom.checkpoint.base import empty_checkpoint
from threadloom.checkpoint.postgres import PostgresSaver

pytestmark = pytest.mark.postgres


class Relay:
    """Forwards one port to the server and counts client turns."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.turns = 0
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
                        server.sendall(data)
                    else:
                        self._last = "server"
                        client.sendall(data)

    def count(self, fn, *args):
        """(round trips, result) of ``fn(*args)``."""
        self.turns = 0
        result = fn(*args)
        return self.turns, result


@pytest.fixture
def relayed(pg_url: str, pg_schema: str) -> Iterator[tuple[PostgresSaver, Relay]]:
    parts = urlsplit(pg_url)
    relay = Relay(parts.hostname or "127.0.0.1", parts.port or 5432)
    user = f"{parts.username}@" if parts.username else ""
    url = urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{relay.port}"))
    with PostgresSaver.from_conn_string(url + "?sslmode=disable", schema=pg_schema) as saver:
        saver.setup()
        yield saver, relay
    relay.listener.close()


def test_put_and_put_writes_cost_two_round_trips(relayed) -> None:
    saver, relay = relayed
    parent = {"configurable": {"thread_id": "rtt", "checkpoint_ns": ""}}
    for i in range(3):
        cp = empty_checkpoint()
        versions = {"messages": str(i + 1), "doc": str(i + 1)}
        cp["channel_values"] = {"messages": list(range(i + 1)), "doc": "x" * (300 + i)}
        cp["channel_versions"] = versions
        put, parent = relay.count(saver.put, parent, cp, {"step": i}, versions)
        writes, _ = relay.count(saver.put_writes, parent, [("messages", [i])], f"t{i}")
        assert (put, writes) == (2, 2)  # statements + COMMIT; read the task row + write/COMMIT

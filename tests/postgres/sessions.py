"""Ending server sessions from the outside, as a restart or failover does."""

from __future__ import annotations

import time

import psycopg


def terminate(pg_url: str, app: str) -> int:
    """pg_terminate_backend every session named ``app``; returns how many. Waits
    a moment so the FATAL and the close reach the clients' sockets."""
    with psycopg.connect(pg_url, autocommit=True) as admin:
        pids = [
            r[0]
            for r in admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (app,)
            )
        ]
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
    time.sleep(0.3)
    return len(pids)

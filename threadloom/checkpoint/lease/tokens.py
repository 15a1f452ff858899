"""Lease tokens: ``host/pid-namespace:pid:random``, unique per acquisition, and
naming the process that holds the lease, so a holder known dead on this host is
taken over at once instead of after its TTL."""

from __future__ import annotations

import os
import socket
import uuid

__all__ = ["holder_is_dead", "new_token"]


def _host_id() -> str:
    """Host name + pid namespace: pids are only comparable inside one namespace, so two
    containers sharing a host name never judge each other's processes dead."""
    try:
        ns = os.readlink("/proc/self/ns/pid").strip("pid:[]")
    except OSError:
        ns = "?"
    return f"{socket.gethostname()}/{ns}".replace(":", "_")


_HOST = _host_id()


def new_token() -> str:
    """``host:pid:random``: unique, and says which process holds the lease."""
    return f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex}"


def holder_is_dead(token: str) -> bool:
    """True when ``token`` was issued by a process of this host that no longer runs."""
    host, _, rest = token.rpartition(":")[0].rpartition(":")
    if host != _HOST or not rest.isdigit():
        return False
    pid = int(rest)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, not ours to signal
        return False
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False

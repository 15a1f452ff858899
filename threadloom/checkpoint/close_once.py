"""A saver's close runs once (``BaseCheckpointSaver._close_once``): a close
called while another is under way waits for it, one reached from inside the
close itself returns, and a child forked during a close closes its own copy.
The state lives on the saver (``_close_done``, ``_close_by``)."""

from __future__ import annotations

import concurrent.futures
import os
import threading
from typing import Any

__all__ = ["claim", "finished"]


_CLAIM = threading.Lock()
# savers whose close is under way: a child forked meanwhile has not that close
# (only the forking thread lives on), so it forgets it (_forget_closes)
# (by id: a saver subclass defining __eq__ is not hashable; held only while closing)
_CLOSING: dict[int, Any] = {}


def _forget_closes() -> None:
    global _CLAIM
    _CLAIM = threading.Lock()  # (another thread of the parent may have held it)
    for saver in list(_CLOSING.values()):
        done = saver.__dict__.get("_close_done")
        if done is not None and not done.done():
            saver.__dict__.pop("_close_done", None)
            saver.__dict__.pop("_close_by", None)
    _CLOSING.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_closes)


def claim(saver: Any, me: Any) -> concurrent.futures.Future[None] | None:
    """The future a close of ``saver`` under way sets when done (None: this call,
    by ``me``, closes it). A close called again from inside the close itself
    (same thread or task) gets a done future: waiting for itself would hang."""
    with _CLAIM:
        done = saver.__dict__.get("_close_done")
        if done is None:
            saver.__dict__["_close_done"] = concurrent.futures.Future()
            _CLOSING[id(saver)] = saver
            saver.__dict__["_close_by"] = me
            return None
        if saver.__dict__.get("_close_by") == me and not done.done():
            reentered: concurrent.futures.Future[None] = concurrent.futures.Future()
            reentered.set_result(None)
            return reentered
        return done


def finished(saver: Any) -> None:
    """The close :func:`claim` gave ``saver``'s caller has ended (waiters go on)."""
    saver.__dict__["_close_done"].set_result(None)
    _CLOSING.pop(id(saver), None)

"""A forked child and the pool (``pool.py``): the child inherits the parent's
idle worker lists but none of their threads, and copies of their pipes. Before
the at-fork hook the child's first ainvoke with a sync node handed it to a
worker that did not exist (it hung forever) and wrote into the parent's pipe.
The child runs in its own interpreter (a subprocess that forks), with an alarm,
so a regression fails instead of hanging the suite."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_SCRIPT = textwrap.dedent(
    """
    import asyncio, operator, os, signal, threading
    from typing import Annotated, TypedDict

    from threadloom.graph import END, START, StateGraph
    from threadloom.pregel.pool import POOL

    class S(TypedDict):
        log: Annotated[list, operator.add]

    b = StateGraph(S)
    b.add_node("a", lambda s: {"log": ["a"]})  # a sync node: runs on the pool
    b.add_edge(START, "a")
    b.add_edge("a", END)
    app = b.compile()

    async def hop():
        return await POOL.run_async(asyncio.get_running_loop(), threading.get_ident)

    def is_open(fd):
        try:
            os.fstat(fd)
        except OSError:
            return False
        return True

    assert asyncio.run(app.ainvoke({"log": []})) == {"log": ["a"]}
    warm = asyncio.run(hop())
    fds = [fd for w in POOL._hand for fd in (w._read, w._write)]
    assert fds and all(map(is_open, fds))
    pid = os.fork()
    if pid == 0:
        signal.alarm(20)  # a hang kills the child: status 14
        inherited = any(map(is_open, fds)) or bool(POOL._hand or POOL._pipes)
        out = asyncio.run(app.ainvoke({"log": []}))
        print("child", "inherited" if inherited else "clean", out, flush=True)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    again = asyncio.run(hop())
    print("parent", status, all(map(is_open, fds)), again == warm, flush=True)
    """
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_its_own_workers_and_leaves_the_parents_alone() -> None:
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=90, cwd=root
    )
    assert out.stdout.splitlines() == [
        "child clean {'log': ['a']}",
        "parent 0 True True",  # the child exited 0; the parent's pipes and warm worker serve on
    ], out.stdout + out.stderr[-2000:]

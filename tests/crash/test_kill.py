"""Crash safety proven by killing processes.

A worker process runs a graph whose nodes append to an effects file OUTSIDE
the thread; the test SIGKILLs it at a random moment (several seeds, every
process-capable backend), then resumes with ``invoke(None)`` in a new worker,
until the run completes. Checked after every kill and at the end:

* every task the stream reported done has its writes saved (no lost step);
* no side effect runs again for a task whose writes were saved before the kill
  (a task killed mid-flight may run twice: that is at-least-once);
* the final state equals an uncrashed run's.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.concurrency.backends import PROCESS_KINDS, make_spec, open_saver
from tests.crash.worker import expected_log

ROOT = Path(__file__).resolve().parents[2]
SEEDS = [1, 2, 3]
MAX_ATTEMPTS = 6


def _lines(path: str) -> list[str]:
    try:
        return Path(path).read_text().split()
    except FileNotFoundError:
        return []


def _saved(saver: Any, thread: str) -> set[str]:
    """Tasks whose writes are durable: in the latest state or pending on it."""
    tup = saver.get_tuple({"configurable": {"thread_id": thread}})
    if tup is None:
        return set()
    done = set(tup.checkpoint["channel_values"].get("log") or [])
    for _tid, channel, value in tup.pending_writes or []:
        if channel == "log":
            done.update(value)
    return done


def _spawn(args: dict[str, Any]) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.crash.worker", json.dumps(args)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def _run_with_kill(args: dict[str, Any], rng: random.Random) -> bool:
    """One worker life, killed once the effects file grew by a random 0..4 lines
    plus a random few milliseconds; True when it finished first."""
    proc = _spawn(args)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    target = len(_lines(args["effects"])) + rng.randint(0, 4)
    deadline = time.monotonic() + 20
    while len(_lines(args["effects"])) < target and proc.poll() is None:
        assert time.monotonic() < deadline, "worker made no progress"
        time.sleep(0.002)
    time.sleep(rng.uniform(0.0, 0.03))
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=30)
    if proc.returncode != -signal.SIGKILL:  # ended on its own: it must have succeeded
        assert proc.returncode == 0 and "done" in out, f"worker failed: {proc.returncode}"
        return True
    return False


CASES = [(kind, seed, "sync") for kind in PROCESS_KINDS for seed in SEEDS]
CASES.append(("sqlite", 4, "async"))  # saves behind the stream: reported steps may be lost


@pytest.mark.parametrize(("kind", "seed", "durability"), CASES)
def test_sigkill_anywhere_then_resume(
    kind: str, seed: int, durability: str, tmp_path, request
) -> None:
    spec = make_spec(kind, str(tmp_path), request)
    args = {
        "durability": durability,
        "spec": spec,
        "thread": f"crash-{seed}",
        "effects": str(tmp_path / "effects.log"),
        "reported": str(tmp_path / "reported.log"),
        "seed": seed,
    }
    rng = random.Random(seed * 7919)
    history: list[tuple[int, set[str]]] = []  # per kill: effects so far, tasks saved
    with open_saver(spec) as saver:
        for _ in range(MAX_ATTEMPTS):
            finished = _run_with_kill(args, rng)
            saved = _saved(saver, args["thread"])
            if durability == "sync":
                assert set(_lines(args["reported"])) <= saved, "a reported step was lost"
            if finished:
                break
            history.append((len(_lines(args["effects"])), saved))
        else:  # still not done: one last life, not killed
            proc = _spawn(args)
            out, _ = proc.communicate(timeout=60)
            assert proc.returncode == 0 and "done" in out
        final = saver.get_tuple({"configurable": {"thread_id": args["thread"]}})
        assert final.checkpoint["channel_values"]["log"] == expected_log()
    effects = _lines(args["effects"])
    for mark, saved in history:
        rerun = set(effects[mark:]) & saved
        assert not rerun, f"side effects repeated after their writes were saved: {rerun}"
    assert set(effects) == set(expected_log())  # every effect ran at least once
    assert history, "the worker was never killed"
    print(f"{kind} seed {seed}: saved tasks at each kill {[len(s) for _, s in history]}")

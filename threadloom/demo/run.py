"""``threadloom demo``: a support conversation that shows what durable graphs buy you.

Memory across turns, two tools in one superstep, a human approval (interrupt and
resume), a process killed mid-step and resumed without redoing finished work, and
a fork from an earlier checkpoint, all on an embedded SQLite file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from threadloom.demo.agent import build_graph, calls, reset_calls
from threadloom.demo.dbfile import prepare_db
from threadloom.demo.tree import TreeRow, render_tree
from threadloom.types import Command

__all__ = ["main", "open_saver", "tree_lines"]

THREAD = "support-1"


def open_saver(path: str) -> Any:
    """A SqliteSaver on ``path`` (the embedded default backend)."""
    from threadloom.checkpoint.sqlite import SqliteSaver

    return (
        SqliteSaver.from_path(path)
        if hasattr(SqliteSaver, "from_path")
        else _from_conn(SqliteSaver, path)
    )


def _from_conn(cls: Any, path: str) -> Any:
    import sqlite3

    return cls(sqlite3.connect(path, check_same_thread=False))


def say(text: str = "") -> None:
    print(text, flush=True)


def _short(value: Any, width: int = 70) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _describe_update(node: str, update: Any) -> str:
    if node == "__interrupt__":
        return "PAUSED for a human: " + "; ".join(_short(i.value) for i in update)
    if not isinstance(update, dict):
        return _short(update)
    parts = []
    for msg in update.get("messages") or ():
        role = msg.get("role")
        calls_ = ", ".join(c["name"] for c in msg.get("tool_calls") or ())
        parts.append(
            f"{role}: {_short(msg.get('content'), 60)}" + (f"  [calls {calls_}]" if calls_ else "")
        )
    for key in ("orders", "customer", "refund"):
        if key in update:
            parts.append(f"{key}={_short(update[key], 60)}")
    return " | ".join(parts) or "(no changes)"


def run_turn(graph: Any, value: Any, config: dict[str, Any]) -> None:
    """Stream one turn, printing each node's update as it lands."""
    for chunk in graph.stream(value, config, stream_mode="updates"):
        for node, update in chunk.items():
            if node.startswith("__") and node != "__interrupt__":
                continue  # bookkeeping chunks (e.g. saved results replayed on resume)
            say(f"    {node:<17} {_describe_update(node, update)}")


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def tree_lines(graph: Any, config: dict[str, Any]) -> list[str]:
    """The thread's checkpoints as an ASCII tree, latest marked."""
    rows = []
    for snap in graph.get_state_history(config):
        meta = snap.metadata or {}
        parent = (snap.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        msgs = snap.values.get("messages") or []
        last = (
            f'{msgs[-1].get("role")}: "{_short(msgs[-1].get("content"), 38)}"'
            if msgs
            else "(empty)"
        )
        nxt = ",".join(snap.next) or "-"
        pause = " PAUSED" if snap.interrupts else ""
        if meta.get("source") == "input":
            last = "(new input arrives)"
        label = f"step {meta.get('step', '?'):>2} {meta.get('source', '?'):<6} next={nxt:<27} {last}{pause}"
        rows.append(TreeRow(snap.config["configurable"]["checkpoint_id"], parent, label))
    head = graph.get_state(config).config["configurable"]["checkpoint_id"]
    return render_tree(rows, head)


def scene_memory(graph: Any, config: dict[str, Any]) -> None:
    say("1) Memory: two turns on one thread; the second answer uses the name from the first.")
    say('  user: "Hi, I\'m Dana."')
    run_turn(graph, user("Hi, I'm Dana."), config)
    say('  user: "Where is my order #A1001?"')
    run_turn(graph, user("Where is my order #A1001?"), config)
    parallel = [s for s in graph.get_state_history(config) if len(s.next) > 1]
    if parallel:
        snap = parallel[0]
        say(
            f"  -> lookup_order and fetch_policy ran as two tasks of ONE superstep "
            f"(step {snap.metadata['step'] + 1}, next={list(snap.next)})."
        )
    say()


def scene_approval(graph: Any, config: dict[str, Any]) -> str:
    say("2) Human approval: the refund pauses the graph until a supervisor answers.")
    say('  user: "It arrived broken, I want a refund."')
    run_turn(graph, user("It arrived broken, I want a refund."), config)
    state = graph.get_state(config)
    paused_at = state.config["configurable"]["checkpoint_id"]
    say(f"  -> thread paused at checkpoint ...{paused_at[-12:]}, next={list(state.next)}")
    say("     (the process could exit here; the pause is stored in SQLite)")
    say('  supervisor: Command(resume={"approved": True, "note": "photo checked"})')
    run_turn(graph, Command(resume={"approved": True, "note": "photo checked"}), config)
    say()
    return paused_at


def scene_crash(graph: Any, saver: Any, config: dict[str, Any], db: str) -> None:
    say("3) Crash: a worker process is killed (SIGKILL) in the middle of a two-task step.")
    before = calls()
    child = subprocess.Popen(
        [sys.executable, "-m", "threadloom.demo.crash", db, THREAD, "Could you also check #A1002?"],
        env={**os.environ, "THREADLOOM_DEMO_HANG": "1"},
    )
    say(f'  worker (pid {child.pid}) user: "Could you also check #A1002?"')
    saved = _wait_for_write(saver, config, "orders", child)
    child.kill()
    child.wait()
    during = calls()
    say(
        f"  -> lookup_order finished and its writes were saved ({saved}); fetch_policy was still running."
    )
    say(
        f"  -> killed worker; exit code {child.returncode}. Calls in the dead worker: {_delta(before, during)}"
    )
    say("  resuming in this process with invoke(None, config):")
    run_turn(graph, None, config)
    say("     (the lookup_order line is its saved result, replayed into the stream)")
    after = calls()
    say(f"  -> calls during resume: {_delta(during, after)}  (lookup_order was NOT re-run)")
    say()


def _wait_for_write(saver: Any, config: dict[str, Any], channel: str, child: Any) -> str:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        tup = saver.get_tuple(config)
        writes = [w for w in (tup.pending_writes or []) if w[1] == channel] if tup else []
        if writes:
            return f"task {writes[0][0][:8]}... wrote {channel!r}"
        if child.poll() is not None:
            raise RuntimeError(f"demo worker exited early with code {child.returncode}")
        time.sleep(0.05)
    child.kill()
    raise RuntimeError("demo worker made no progress in 20 s")


def _delta(before: dict[str, int], after: dict[str, int]) -> str:
    diff = {k: after.get(k, 0) - before.get(k, 0) for k in sorted(after)}
    return ", ".join(f"{k} x{v}" for k, v in diff.items() if v) or "none"


def scene_fork(graph: Any, config: dict[str, Any]) -> None:
    say("4) Fork: go back to before the refund request and try another path.")
    target = None
    for snap in graph.get_state_history(config):
        msgs = snap.values.get("messages") or []
        if snap.metadata.get("source") == "loop" and not snap.next and len(msgs) >= 6:
            target = snap  # end of turn 2: A1001 looked up, no refund yet
    assert target is not None, "turn 2 checkpoint not found"
    cid = target.config["configurable"]["checkpoint_id"]
    say(
        f"  checkpoint ...{cid[-12:]} (step {target.metadata['step']}): {_short(target.values['messages'][-1]['content'], 60)}"
    )
    fork_config = {"configurable": {"thread_id": THREAD, "checkpoint_id": cid}}
    say('  user (on the fork): "Actually, a replacement would be better."')
    run_turn(graph, user("Actually, a replacement would be better."), fork_config)
    latest = graph.get_state(config)
    refund = latest.values.get("refund")
    say(f"  -> the thread now continues on the fork; refund on this branch: {refund}")
    say("     the refund branch is still stored and can be read by checkpoint_id.")
    say()


def storage_line(saver: Any) -> str:
    """One line on what the thread costs on disk (if the saver reports it)."""
    try:
        stats = saver.stats()
    except (NotImplementedError, AttributeError):
        return "storage: (this saver reports no stats)"
    if not isinstance(stats, dict):
        stats = stats._asdict() if hasattr(stats, "_asdict") else vars(stats)
    return (
        f"storage: {stats.get('checkpoints')} checkpoints and {stats.get('writes')} saved task-write rows in "
        f"{stats.get('bytes_stored')} bytes (state as written: {stats.get('bytes_logical')} bytes)"
    )


def main(db: str = "threadloom-demo.db", force: bool = False) -> int:
    """Run the whole scripted demo on a fresh SQLite file at ``db``.

    Raises:
        DemoFileRefused: ``db`` exists and the demo did not create it (and not
            ``force``): the demo never deletes a file it did not make.
    """
    prepare_db(db, force)
    workdir = tempfile.mkdtemp(prefix="threadloom-demo-")
    os.environ["THREADLOOM_DEMO_CALLS"] = str(Path(workdir) / "calls.json")
    reset_calls()
    saver = open_saver(db)
    try:
        _story(saver, db)
    finally:
        if hasattr(saver, "close"):
            saver.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _story(saver: Any, db: str) -> None:
    started = time.monotonic()
    graph = build_graph(saver)
    config = {"configurable": {"thread_id": THREAD}}
    say(f"threadloom demo: a support agent on SQLite ({db}), thread {THREAD!r}, scripted model\n")
    scene_memory(graph, config)
    scene_approval(graph, config)
    scene_crash(graph, saver, config, db)
    scene_fork(graph, config)
    say("5) The thread's checkpoint tree (oldest first; each fork opens a branch):")
    for line in tree_lines(graph, config):
        say("  " + line)
    say(f"\nnode calls in total: {calls()}")
    say(storage_line(saver))
    say(f"done in {time.monotonic() - started:.1f}s. Look next:")
    for command in ("threads {db}", "history {db} {t}", "tree {db} {t}", "stats {db}"):
        say("  threadloom " + command.format(db=db, t=THREAD))
    say("  docs/demo.md (what each scene shows) and docs/graph.md (the StateGraph API)")

"""Workload 3: a long conversation on one thread, like a chat agent's lifetime.

Each turn appends a human message, then runs START -> agent -> tools -> agent
-> END with a scripted fake model: the first agent pass decides to call a tool,
the tool writes a small result, the second pass answers with one AI message.
That is 2 messages of ~200 bytes and 4 checkpoints per turn. A saver that
stores the whole message list in every checkpoint grows as O(N^2).

Reported: bytes stored at each N (minus the empty-database baseline), the
log-log growth exponent, turn and save time at the start and end, latest-state
load time and history listing time (limit=10 at the end; the whole history at
the smallest N, since LangGraph needs minutes to load 5,000 full-state
checkpoints at N=1000).
"""

from __future__ import annotations

import functools
import math
import random
import sqlite3
import statistics
import tempfile
import threading
import time
from contextlib import ExitStack
from typing import Annotated, Any, TypedDict

from bench.harness import Case, Config, MetricSpec, Outcome, median_seconds, na_reason
from bench.sides import NotAvailable, Side, pg_url
from bench.workloads.common import agent_loop, invoke, thread

__all__ = ["cases", "growth_exponent", "stored_bytes"]

LETTERS = "abcdefghijklmnopqrstuvwxyz"
WINDOW = 10  # turns averaged for "start" and "end" timings


def _text(kind: str, turn: int) -> str:
    """~200 bytes of seeded random words: about as hard to compress as real chat
    text is easy, so neither side's compression (or TOAST) gets a free ride."""
    rng = random.Random(f"{kind}-{turn}")
    words = [f"{kind} {turn}:"]
    while sum(len(w) + 1 for w in words) < 200:
        words.append("".join(rng.choices(LETTERS, k=rng.randint(2, 9))))
    return " ".join(words)[:200]


def human(turn: int) -> Any:
    from langchain_core.messages import HumanMessage

    return HumanMessage(content=_text("question", turn), id=f"h-{turn}")


def _answer(turn: int) -> Any:
    from langchain_core.messages import AIMessage

    return AIMessage(content=_text("answer", turn), id=f"a-{turn}")


def build_agent(side: Side):
    """The agent loop graph, with ``messages`` reduced by the side's add_messages."""
    state = TypedDict(  # noqa: UP013 (the reducer depends on the side)
        "ConvState",
        {
            "messages": Annotated[list, side.get("add_messages")],
            "pending_tool": Any,
            "tool_result": Any,
            "turn": int,
        },
    )

    def agent(s: dict[str, Any]) -> dict[str, Any]:
        if s.get("tool_result") is None:
            return {"pending_tool": "lookup"}
        return {"messages": [_answer(s["turn"])], "tool_result": None}

    def tools(s: dict[str, Any]) -> dict[str, Any]:
        return {"pending_tool": None, "tool_result": f"lookup result for turn {s['turn']}"}

    return agent_loop(side, state, agent, tools, lambda s: bool(s.get("pending_tool")))


_OPTIONAL_SAVES = ("put_step", "put_steps")
_SAVES = ("put", "put_writes", *_OPTIONAL_SAVES)


class SaveTimer:
    """Sums the time spent in the saver's ``put``/``put_writes`` (any thread),
    and in ``put_step``/``put_steps`` where a saver has them (threadloom saves a
    step's last writes and its checkpoint in one call).

    Wraps the saver instance's methods and, for a side whose runs save through
    a wrapper class (threadloom's lease ``FencedSaver``), that class's methods
    too until :meth:`restore`. Nested calls (wrapper -> saver) count once.
    """

    def __init__(self, saver: Any, side: Side) -> None:
        self.total = 0.0
        self.ok = True
        self._lock = threading.Lock()
        self._local = threading.local()
        self._undo: list[tuple[Any, str, Any]] = []
        for name in _SAVES:
            method = getattr(saver, name, None)
            if method is None:
                self.ok = self.ok and name in _OPTIONAL_SAVES
                continue
            try:
                setattr(saver, name, self._wrap(method))
            except (AttributeError, TypeError):
                self.ok = False
        try:
            fenced = side.get("FencedSaver")
        except NotAvailable:
            return
        for name in _SAVES:
            original = fenced.__dict__.get(name)
            if original is not None:
                self._undo.append((fenced, name, original))
                setattr(fenced, name, self._wrap(original))

    def _wrap(self, fn: Any) -> Any:
        @functools.wraps(fn)  # keeps the signature (runtimes inspect put_writes for task_path)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if getattr(self._local, "depth", 0):
                return fn(*args, **kwargs)
            self._local.depth = 1
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._local.depth = 0
                with self._lock:
                    self.total += time.perf_counter() - t0

        return timed

    def take(self) -> float:
        with self._lock:
            total, self.total = self.total, 0.0
        return total

    def restore(self) -> None:
        """Put the wrapper class's own methods back."""
        for cls, name, original in self._undo:
            setattr(cls, name, original)
        self._undo.clear()


def stored_bytes(saver: Any) -> int:
    """Bytes the saver's tables occupy, measured the same way for both sides.

    SQLite: pages in use, ``(page_count - freelist_count) * page_size`` on a fresh
    connection (WAL content included). Postgres: ``pg_total_relation_size`` of
    every table in the saver's schema (heap + TOAST + indexes).
    """
    path = getattr(saver, "bench_sqlite_path", None)
    if path:
        conn = sqlite3.connect(path)
        try:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            free = conn.execute("PRAGMA freelist_count").fetchone()[0]
            size = conn.execute("PRAGMA page_size").fetchone()[0]
        finally:
            conn.close()
        return (pages - free) * size
    schema = getattr(saver, "bench_pg_schema", None)
    if schema:
        row = saver.bench_pg_admin.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'p')",
            (schema,),
        ).fetchone()
        return int(row[0])
    raise NotAvailable("storage size only measured for SQLite and Postgres")


def growth_exponent(sizes: dict[int, float]) -> float | None:
    """Least-squares slope of log(bytes) over log(N)."""
    pts = [(math.log(n), math.log(b)) for n, b in sizes.items() if b > 0]
    if len(pts) < 2:
        return None
    mx = statistics.fmean(x for x, _ in pts)
    my = statistics.fmean(y for _, y in pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


class _Run:
    """One side's conversation: its graph, saver and measurements so far."""

    def __init__(self, side: Side, saver: Any, ns: tuple[int, ...]) -> None:
        self.graph = build_agent(side).compile(checkpointer=saver)
        self.saver = saver
        self.ns = ns
        self.timer = SaveTimer(saver, side)
        self.config = thread("conversation")
        self.base = stored_bytes(saver)
        self.values: dict[str, float] = {}
        self.turns: list[float] = []
        self.saves: list[float] = []
        self.sizes: dict[int, float] = {}

    def turn(self, turn: int) -> None:
        self.timer.take()
        t0 = time.perf_counter()
        invoke(self.graph, {"messages": [human(turn)], "turn": turn}, self.config, "sync")
        self.turns.append(time.perf_counter() - t0)
        self.saves.append(self.timer.take())
        if turn in self.ns:
            self.sizes[turn] = stored_bytes(self.saver) - self.base
            self.values[f"MB@N={turn}"] = self.sizes[turn] / 1e6
        if turn == self.ns[0]:
            t0 = time.perf_counter()
            count = len(list(self.graph.get_state_history(self.config)))
            self.values[f"history(all)@N={turn} ms"] = (time.perf_counter() - t0) * 1e3
            self.values[f"checkpoints@N={turn}"] = count

    def finish(self, reps: int) -> Outcome:
        values, graph, config = self.values, self.graph, self.config
        values["growth exponent"] = growth_exponent(self.sizes)
        values["turn ms (start)"] = statistics.median(self.turns[:WINDOW]) * 1e3
        values["turn ms (end)"] = statistics.median(self.turns[-WINDOW:]) * 1e3
        if self.timer.ok and sum(self.saves) > 0:  # 0: the runtime saved through something else
            values["save ms/turn (start)"] = statistics.median(self.saves[:WINDOW]) * 1e3
            values["save ms/turn (end)"] = statistics.median(self.saves[-WINDOW:]) * 1e3
        state: list = []
        secs = median_seconds(lambda: state.append(graph.get_state(config)), reps)
        values["get_state ms"] = secs * 1e3
        secs = median_seconds(lambda: list(graph.get_state_history(config, limit=10)), reps)
        values["history(limit=10) ms"] = secs * 1e3
        return Outcome(values, final=state[-1].values)


def _paired(kind: str):
    """Both sides converse in lock-step, alternating who goes first each turn,
    so load from other processes hits both alike over the minutes this takes."""

    def fn(sides: list[Side], cfg: Config) -> dict[str, tuple[Outcome | None, str]]:
        ns = cfg.pick((100, 300, 1000), (20, 40))
        results: dict[str, tuple[Outcome | None, str]] = {}
        runs: dict[str, _Run] = {}
        with tempfile.TemporaryDirectory(dir=cfg.workdir) as tmp, ExitStack() as stack:
            for side in sides:
                try:
                    runs[side.name] = _Run(side, stack.enter_context(side.saver(kind, tmp)), ns)
                    stack.callback(runs[side.name].timer.restore)
                except Exception as exc:  # one side missing must not stop the other
                    results[side.name] = (None, na_reason(exc, cfg))
            for turn in range(1, ns[-1] + 1):
                order = list(runs.items())
                for name, run in order if turn % 2 else order[::-1]:
                    try:
                        run.turn(turn)
                    except Exception as exc:
                        results[name] = (None, na_reason(exc, cfg))
                        del runs[name]
            for name, run in runs.items():
                try:
                    results[name] = (run.finish(cfg.reps), "")
                except Exception as exc:
                    results[name] = (None, na_reason(exc, cfg))
        return results

    return fn


def _solo(kind: str):
    """One side alone for N turns: how its own save time grows (issue #7: a save
    at turn 1,000 within 1.3x of one at turn 10). Lock-step would charge each
    side with the other's load: LangGraph's saves at turn 1,000 write ~70 ms of
    data into the same server and disk, which slows the other side's commits."""

    def fn(side: Side, cfg: Config) -> Outcome:
        turns = cfg.pick(1000, 40)
        with tempfile.TemporaryDirectory(dir=cfg.workdir) as tmp:
            with side.saver(kind, tmp) as saver:
                run = _Run(side, saver, (turns,))
                try:
                    for turn in range(1, turns + 1):
                        run.turn(turn)
                finally:
                    run.timer.restore()
                if not (run.timer.ok and sum(run.saves) > 0):
                    raise RuntimeError("saves were not timed on this side")
                start = statistics.median(run.saves[:WINDOW])
                end = statistics.median(run.saves[-WINDOW:])
                final = run.graph.get_state(run.config).values
        values = {
            "save ms/turn (start)": start * 1e3,
            "save ms/turn (end)": end * 1e3,
            "save growth (end/start)": end / start,
        }
        return Outcome(values, final=final)

    return fn


def cases(cfg: Config) -> list[Case]:
    ns = cfg.pick((100, 300, 1000), (20, 40))
    metrics = [
        MetricSpec(f"MB@N={n}", "MB", ("max", 4.0) if n == 1000 else ("ratio", 1.0)) for n in ns
    ]
    metrics.append(MetricSpec("growth exponent", "", ("max", 1.05), ratio=False))
    metrics += [
        MetricSpec(key, "ms")
        for key in (
            "turn ms (start)",
            "turn ms (end)",
            "save ms/turn (start)",
            "save ms/turn (end)",
            "get_state ms",
            "history(limit=10) ms",
            f"history(all)@N={ns[0]} ms",
        )
    ]
    metrics.append(MetricSpec(f"checkpoints@N={ns[0]}", "", None, ratio=False))
    kinds = ["sqlite-normal"] + (["postgres"] if pg_url() else [])
    solo = [
        MetricSpec("save ms/turn (start)", "ms", None),
        MetricSpec("save ms/turn (end)", "ms", None),
        MetricSpec("save growth (end/start)", "x", ("max", 1.3), ratio=False),
    ]
    return [Case("conversation", f"{k}/sync", None, metrics, paired=_paired(k)) for k in kinds] + [
        Case("conversation", f"{k}/solo", _solo(k), solo, interleave=False) for k in kinds
    ]

"""Cases, rows and the loop that runs every case on both sides.

A workload module exposes ``cases(cfg) -> list[Case]``. Each case runs once per
side and returns an :class:`Outcome` (metric values plus the canonical final
state). The harness turns the pair into :class:`Row` objects, one per metric,
with the LangGraph / threadloom ratio and the target check. Any exception on
one side becomes that cell's ``n/a: <reason>``; the other side still runs.
"""

from __future__ import annotations

import dataclasses
import gc
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.sides import NotAvailable, Side

__all__ = [
    "Case",
    "Config",
    "MetricSpec",
    "Outcome",
    "Row",
    "canon",
    "median_seconds",
    "na_reason",
    "per_call_median",
    "run_cases",
]


@dataclass
class Config:
    """Sizes and repetitions; ``quick`` shrinks everything to run in seconds."""

    quick: bool = False
    reps: int = 5
    workdir: str = "."
    verbose: bool = False
    half: bool = False  # set for each half of an ABBA pair

    def pick(self, full: Any, quick: Any) -> Any:
        return quick if self.quick else full

    def share(self, full: int, quick: int) -> int:
        """This run's share of a per-side total: half of it in each ABBA half."""
        n = self.pick(full, quick)
        return max(1, n // 2) if self.half else n


@dataclass(frozen=True)
class MetricSpec:
    """One reported number. Lower is better for every metric we report.

    ``target`` is ``("ratio", x)`` (LangGraph / threadloom must be >= x),
    ``("max", x)`` (threadloom's value must be <= x) or None.
    """

    key: str
    unit: str
    target: tuple[str, float] | None = ("ratio", 1.0)
    ratio: bool = True


@dataclass
class Outcome:
    values: dict[str, float]
    final: Any = None
    note: str = ""


@dataclass
class Case:
    workload: str
    name: str
    fn: Callable[[Side, Config], Outcome] | None
    metrics: list[MetricSpec]
    compare_state: bool = True
    # runs both sides in lock-step itself (e.g. turn by turn); returns name -> (outcome, n/a)
    paired: Callable[[list[Side], Config], dict[str, tuple[Outcome | None, str]]] | None = None
    # ABBA: run LangGraph, threadloom, threadloom, LangGraph with half the reps
    # each, so load drift from other processes on the box hits both sides alike
    interleave: bool = True


@dataclass
class Row:
    workload: str
    case: str
    metric: str
    unit: str
    langgraph: float | None
    threadloom: float | None
    langgraph_na: str = ""
    threadloom_na: str = ""
    ratio: float | None = None
    target: str = ""
    target_ok: bool | None = None
    same_state: bool | None = None
    notes: dict[str, str] = field(default_factory=dict)
    # derived for reading the others (bench/floor.py): no target, not in the summary
    informational: bool = False

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def median_seconds(
    fn: Callable[[], Any], reps: int, warmup: int = 1, collect: bool = True
) -> float:
    """Median wall time of ``fn`` over ``reps`` runs, after ``warmup`` untimed runs.

    ``collect`` runs a full GC before each rep so one rep's garbage is not paid
    by the next; turn it off for micro-operations, where a GC pass costs more
    than the operation.
    """
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(max(1, reps)):
        if collect:
            gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def per_call_median(fn: Callable[[int], Any], calls: int) -> float:
    """Median wall time of ``fn(i)`` over ``calls`` calls, each timed on its own.

    A per-call median shrugs off load spikes from other processes that would
    inflate a batch total; no GC pass between calls (it would dominate).
    """
    times = []
    for i in range(calls):
        t0 = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def canon(value: Any) -> Any:
    """A plain, comparable form of a state value (messages become small dicts)."""
    if isinstance(value, Mapping):
        if "content" in value and ("role" in value or "type" in value):
            return _canon_message(value.get("type") or value.get("role"), value)
        return {str(k): canon(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canon(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: canon(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "content") and hasattr(value, "type"):
        return _canon_message(value.type, value)
    if hasattr(value, "model_dump"):
        return canon(value.model_dump())
    return value


_ROLE = {"user": "human", "assistant": "ai", "human": "human", "ai": "ai", "tool": "tool"}


def _canon_message(kind: Any, msg: Any) -> dict[str, Any]:
    def get(name: str) -> Any:
        return msg.get(name) if isinstance(msg, Mapping) else getattr(msg, name, None)

    calls = [
        (c.get("name"), canon(c.get("args")), c.get("id"))
        for c in (get("tool_calls") or [])
        if isinstance(c, Mapping)
    ]
    return {
        "type": _ROLE.get(str(kind), str(kind)),
        "content": get("content"),
        "id": get("id"),
        "tool_calls": calls,
        "tool_call_id": get("tool_call_id"),
    }


def na_reason(exc: BaseException, cfg: Config) -> str:
    """The n/a text for a side that failed: the missing feature, or the error."""
    if isinstance(exc, NotAvailable):
        return str(exc)
    if cfg.verbose:
        traceback.print_exception(exc, file=sys.stderr)
    return f"error: {type(exc).__name__}: {str(exc)[:160]}"


def _run_side(case: Case, side: Side, cfg: Config) -> tuple[Outcome | None, str]:
    gc.collect()
    try:
        return case.fn(side, cfg), ""
    except Exception as exc:  # any failure of one side must not stop the bench
        return None, na_reason(exc, cfg)


def _target(spec: MetricSpec, ratio: float | None, tl: float | None) -> tuple[str, bool | None]:
    if spec.target is None:
        return "", None
    kind, bound = spec.target
    if kind == "ratio":
        return f"ratio >= {bound:g}", (None if ratio is None else ratio >= bound)
    return f"<= {bound:g} {spec.unit}", (None if tl is None else tl <= bound)


def _rows(case: Case, results: dict[str, tuple[Outcome | None, str]]) -> list[Row]:
    lg, lg_na = results["langgraph"]
    tl, tl_na = results["threadloom"]
    same = None
    if case.compare_state and lg is not None and tl is not None:
        same = canon(lg.final) == canon(tl.final)
    rows = []
    for spec in case.metrics:
        lv = lg.values.get(spec.key) if lg else None
        tv = tl.values.get(spec.key) if tl else None
        ratio = lv / tv if spec.ratio and lv is not None and tv else None
        target, ok = _target(spec, ratio, tv)
        notes = {s: o.note for s, o in (("langgraph", lg), ("threadloom", tl)) if o and o.note}
        rows.append(
            Row(
                case.workload,
                case.name,
                spec.key,
                spec.unit,
                lv,
                tv,
                lg_na or ("" if lv is not None else "n/a: not measured"),
                tl_na or ("" if tv is not None else "n/a: not measured"),
                ratio,
                target,
                ok,
                same,
                notes,
            )
        )
    return rows


def _merge(first: tuple[Outcome | None, str], second: tuple[Outcome | None, str]):
    """One side's two ABBA halves: the mean of each metric; n/a if either half failed."""
    (a, a_na), (b, b_na) = first, second
    if a is None or b is None:
        return None, a_na or b_na
    keys = a.values.keys() & b.values.keys()
    values = {k: (a.values[k] + b.values[k]) / 2 for k in keys if a.values[k] is not None}
    return Outcome(values, final=b.final, note=b.note or a.note), ""


def _run_case(case: Case, sides: list[Side], cfg: Config) -> dict[str, tuple[Outcome | None, str]]:
    if case.paired is not None:
        return case.paired(sides, cfg)
    if not case.interleave or cfg.quick or len(sides) != 2 or cfg.reps < 2:
        return {side.name: _run_side(case, side, cfg) for side in sides}
    half = dataclasses.replace(cfg, reps=(cfg.reps + 1) // 2, half=True)
    a, b = sides
    a1 = _run_side(case, a, half)
    b1 = _run_side(case, b, half)
    b2 = _run_side(case, b, half) if b1[0] is not None else b1
    a2 = _run_side(case, a, half) if a1[0] is not None else a1
    return {a.name: _merge(a1, a2), b.name: _merge(b1, b2)}


def run_cases(
    cases: list[Case],
    sides: list[Side],
    cfg: Config,
    progress: Callable[[str], None] | None = None,
) -> list[Row]:
    """Run each case on every side (LangGraph first, ABBA when the case allows) into rows."""
    rows: list[Row] = []
    for case in cases:
        t0 = time.perf_counter()
        results = _run_case(case, sides, cfg)
        new = _rows(case, results)
        rows.extend(new)
        if progress:
            took = time.perf_counter() - t0
            progress(f"{case.workload:<12} {case.name:<28} done in {took:6.1f}s")
    return rows

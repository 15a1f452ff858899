"""The quick bench runs end to end in-process, on both sides, with the same results.

No timing assertions: only that the report has its structure, that LangGraph
and threadloom both produced a number in every cell, and that both ended each
workload in the same final state.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.__main__ import run
from bench.workloads import WORKLOADS


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("bench-out")
    result = run(quick=True, out_dir=str(out), echo=False)
    result["out"] = out
    return result


def test_report_structure(quick: dict) -> None:
    rows = quick["rows"]
    assert {r.workload for r in rows} == set(WORKLOADS)
    data = json.loads((quick["out"] / "results.json").read_text())
    env = data["environment"]
    assert env["mode"] == "quick"
    assert env["nproc"] and env["python"] and env["versions"]["langgraph"] == "1.2.22"
    assert len(data["rows"]) == len(rows)
    assert {"workload", "case", "metric", "langgraph", "threadloom", "ratio"} <= set(
        data["rows"][0]
    )
    assert "LangGraph" in quick["table"] and "re-run" in quick["table"]
    assert (quick["out"] / "results.txt").exists()


def test_plots_are_pngs(quick: dict) -> None:
    pngs = [Path(p) for p in quick["files"] if p.endswith(".png")]
    assert pngs, quick["files"]
    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_langgraph_side_produced_numbers(quick: dict) -> None:
    missing = [(r.case, r.metric, r.langgraph_na) for r in quick["rows"] if r.langgraph is None]
    assert not missing


def test_threadloom_side_matches(quick: dict) -> None:
    rows = quick["rows"]
    missing = [(r.case, r.metric, r.threadloom_na) for r in rows if r.threadloom is None]
    assert not missing, quick["table"]
    diff = sorted({(r.workload, r.case) for r in rows if r.same_state is False})
    assert not diff, quick["table"]
    assert all(r.ratio is not None for r in rows if r.metric.endswith(("ms", "us")))


def test_abba_pairs_and_na_cells() -> None:
    """ABBA runs each side twice (means of halves); a missing feature is an n/a cell."""
    from bench.harness import Case, Config, MetricSpec, Outcome, run_cases
    from bench.sides import NotAvailable, sides

    calls: list[tuple[str, bool]] = []

    def fn(side, cfg: Config) -> Outcome:
        calls.append((side.name, cfg.half))
        value = 10.0 if side.name == "langgraph" else 2.0 + len(calls)
        return Outcome({"ms": value}, final={"n": 1})

    def missing(side, cfg: Config) -> Outcome:
        if side.name == "threadloom":
            raise NotAvailable("feature X missing")
        return Outcome({"ms": 1.0})

    cfg = Config(quick=False, reps=2)
    spec = [MetricSpec("ms", "ms")]
    rows = run_cases([Case("w", "abba", fn, spec), Case("w", "na", missing, spec)], sides(), cfg)
    assert calls == [
        ("langgraph", True),
        ("threadloom", True),
        ("threadloom", True),
        ("langgraph", True),
    ]
    abba, na = rows
    assert abba.langgraph == 10.0 and abba.threadloom == (4.0 + 5.0) / 2
    assert abba.ratio == 10.0 / 4.5 and abba.same_state is True and abba.target_ok is True
    assert na.threadloom is None and na.threadloom_na == "feature X missing"
    assert na.ratio is None and na.target_ok is None


def test_growth_exponent_and_canon() -> None:
    from bench.harness import canon
    from bench.workloads.conversation import growth_exponent

    assert abs(growth_exponent({100: 1e4, 300: 9e4, 1000: 1e6}) - 2.0) < 1e-9
    assert abs(growth_exponent({20: 2.0, 40: 4.0}) - 1.0) < 1e-9
    as_dict = {"role": "user", "content": "hi", "id": "1"}

    class Msg:
        type, content, id, tool_calls, tool_call_id = "human", "hi", "1", [], None

    assert canon([as_dict]) == canon([Msg()])


def test_commit_floor_rows(quick: dict) -> None:
    """Each durable store gets a commit-floor row and, next to it, the bound row
    (LangGraph's sync step over threadloom's bare step plus the floor), in the
    table and the JSON, flagged informational and left out of the summary."""
    from bench.floor import BOUND_METRIC, FLOOR_METRIC
    from bench.sides import pg_url

    rows = quick["rows"]
    kinds = ["sqlite-full", "sqlite-normal"] + (["postgres"] if pg_url() else [])
    floors = {r.case: r for r in rows if r.metric == FLOOR_METRIC}
    assert sorted(floors) == sorted(f"{k}/commit-floor" for k in kinds)
    none = next(r for r in rows if r.case == "none/-" and r.workload == "superstep")
    for kind in kinds:
        floor = floors[f"{kind}/commit-floor"]
        assert floor.langgraph > 0 and floor.threadloom > 0 and floor.ratio is None
        i = rows.index(floor)
        bound = rows[i + 1]
        assert (bound.case, bound.metric, bound.informational) == (
            f"{kind}/sync",
            BOUND_METRIC,
            True,
        )
        sync = next(r for r in rows[:i] if r.case == f"{kind}/sync")
        assert bound.langgraph == sync.langgraph
        assert bound.threadloom == none.threadloom + min(floor.langgraph, floor.threadloom)
        assert bound.ratio == bound.langgraph / bound.threadloom and bound.target == ""
    assert BOUND_METRIC in quick["table"] and FLOOR_METRIC in quick["table"]
    data = json.loads((quick["out"] / "results.json").read_text())
    derived = [r for r in data["rows"] if r["metric"] == BOUND_METRIC]
    assert len(derived) == len(kinds) and all(r["informational"] for r in derived)


def test_bound_rows_skip_missing_inputs_and_summary() -> None:
    from bench.floor import BOUND_METRIC, FLOOR_METRIC, bound_rows
    from bench.harness import Row
    from bench.report import summarize

    step = "us/superstep"
    rows = [
        Row("superstep", "none/-", step, "us", 300.0, 100.0, ratio=3.0),
        Row("superstep", "sqlite-full/sync", step, "us", 900.0, 450.0, ratio=2.0),
        Row("superstep", "sqlite-full/commit-floor", FLOOR_METRIC, "us", 250.0, 200.0),
        Row("superstep", "postgres/commit-floor", FLOOR_METRIC, "us", 400.0, 420.0),
    ]
    out = bound_rows(rows)
    assert [r.metric for r in out] == [step, step, FLOOR_METRIC, BOUND_METRIC, FLOOR_METRIC]
    bound = out[3]
    assert (bound.langgraph, bound.threadloom, bound.ratio) == (900.0, 300.0, 3.0)
    # no postgres/sync row: no bound for postgres; the bound is not in the geomean
    assert summarize(out)["superstep"]["geomean_ratio"] == round((3.0 * 2.0) ** 0.5, 3)

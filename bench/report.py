"""Turn bench rows into a printed table, ``results.json`` and PNG plots.

Every ratio is LangGraph / threadloom of a lower-is-better number (time or
bytes), so a ratio above 1 means threadloom is faster or smaller.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

from bench.harness import Row
from bench.sides import pg_url

__all__ = [
    "RERUN",
    "environment",
    "format_markdown",
    "format_table",
    "write_json",
    "write_plots",
]

RERUN = "make bench  (or: .venv/bin/python -m bench [--quick] [--only WORKLOAD ...])"
DISTS = (
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "langchain-core",
    "threadloom",
)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            timeout=5,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _pg_version() -> str:
    url = pg_url()
    if not url:
        return "disabled (set THREADLOOM_BENCH_PG or THREADLOOM_TEST_PG)"
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3) as conn:
            return str(conn.execute("SHOW server_version").fetchone()[0])
    except Exception as exc:  # only informational
        return f"unreachable: {exc}"


def load_average() -> list[float] | None:
    """1/5/15-minute load average: other processes on the box skew timings."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def environment(
    quick: bool, reps: int, elapsed: float | None = None, load_start: list[float] | None = None
) -> dict[str, Any]:
    """Versions, machine and how to re-run, stored with every result."""
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "mode": "quick" if quick else "full",
        "reps": reps,
        "elapsed_s": elapsed,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "nproc": os.cpu_count(),
        "loadavg_start": load_start,
        "loadavg_end": load_average(),
        "sqlite": sqlite3.sqlite_version,
        "postgres": _pg_version(),
        "versions": {d: _version(d) for d in DISTS},
        "threadloom_commit": _git_commit(),
        "rerun": RERUN,
        "ratio": "LangGraph / threadloom (lower-is-better metrics): > 1 means threadloom is better",
    }


def summarize(rows: list[Row]) -> dict[str, Any]:
    """Per workload: geometric-mean ratio, targets met/missed, state mismatches, n/a cells."""
    out: dict[str, Any] = {}
    for wl in dict.fromkeys(r.workload for r in rows):
        mine = [r for r in rows if r.workload == wl and not r.informational]
        ratios = [r.ratio for r in mine if r.ratio]
        geo = math.exp(statistics.fmean(math.log(x) for x in ratios)) if ratios else None
        out[wl] = {
            "geomean_ratio": round(geo, 3) if geo else None,
            "targets_met": sum(r.target_ok is True for r in mine),
            "targets_missed": sum(r.target_ok is False for r in mine),
            "state_diffs": len({r.case for r in mine if r.same_state is False}),
            "threadloom_na": sum(r.threadloom is None for r in mine),
        }
    return out


def _summary_lines(rows: list[Row]) -> list[str]:
    lines = ["summary (geo-mean of LG/TL ratios; targets met/missed; final-state diffs; TL n/a):"]
    for wl, s in summarize(rows).items():
        geo = f"{s['geomean_ratio']:.2f}x" if s["geomean_ratio"] else "-"
        lines.append(
            f"  {wl:<13} {geo:>7}  targets {s['targets_met']}/{s['targets_met'] + s['targets_missed']}"
            f"  state diffs {s['state_diffs']}  n/a {s['threadloom_na']}"
        )
    return lines


def _num(value: float | None) -> str:
    if value is None:
        return ""
    mag = abs(value)
    if mag >= 1e9:
        return f"{value / 1e9:.2f}G"
    if mag >= 1e6:
        return f"{value / 1e6:.2f}M"
    if mag >= 1e4:
        return f"{value / 1e3:.1f}k"
    if mag >= 100:
        return f"{value:.0f}"
    if mag >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _cell(value: float | None, na: str, footnotes: list[str]) -> str:
    if value is not None:
        return _num(value)
    if na not in footnotes:
        footnotes.append(na)
    return f"n/a[{footnotes.index(na) + 1}]"


def format_table(rows: list[Row], env: dict[str, Any]) -> str:
    """A fixed-width table of every row, with footnotes for the n/a reasons."""
    footnotes: list[str] = []
    head = (
        "workload",
        "case",
        "metric",
        "LangGraph",
        "threadloom",
        "LG/TL",
        "target",
        "ok",
        "state",
    )
    table = [head]
    for r in rows:
        ok = {True: "yes", False: "NO", None: "-"}[r.target_ok]
        same = {True: "same", False: "DIFF", None: "-"}[r.same_state]
        table.append(
            (
                r.workload,
                r.case,
                r.metric,
                _cell(r.langgraph, r.langgraph_na, footnotes),
                _cell(r.threadloom, r.threadloom_na, footnotes),
                f"{r.ratio:.2f}x" if r.ratio is not None else "-",
                r.target or "-",
                ok if r.target else "-",
                same,
            )
        )
    widths = [max(len(str(line[i])) for line in table) for i in range(len(head))]
    lines = [
        f"threadloom bench ({env['mode']}, medians, --reps {env['reps']}"
        f"{', sides run ABBA' if env['mode'] == 'full' and env['reps'] > 1 else ''}) - {env['date']}",
        f"python {env['python']} on {env['cpu']}, nproc={env['nproc']}, sqlite {env['sqlite']}, "
        f"postgres {env['postgres']}",
        f"load average at start {env['loadavg_start']}, at end {env['loadavg_end']}",
        "versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items()),
        f"ratio = {env['ratio']}",
        "",
    ]
    for i, line in enumerate(table):
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    if footnotes:
        lines.append("")
        lines += [f"[{i + 1}] {reason}" for i, reason in enumerate(footnotes)]
    lines += ["", *_summary_lines(rows), "", f"re-run: {env['rerun']}"]
    return "\n".join(lines)


def format_markdown(rows: list[Row], env: dict[str, Any]) -> str:
    """The same table as Markdown (pasted into docs/benchmarks.md)."""
    footnotes: list[str] = []
    out = [
        f"{env['mode']} run, medians, --reps {env['reps']}, {env['date']}; python {env['python']}, "
        f"{env['cpu']}, nproc={env['nproc']}, load {env['loadavg_start']} -> {env['loadavg_end']}, "
        f"SQLite {env['sqlite']}, PostgreSQL {env['postgres']}; "
        + ", ".join(f"{k} {v}" for k, v in env["versions"].items())
        + f" (threadloom commit {env['threadloom_commit']}).",
        "",
        "| workload | case | metric | LangGraph | threadloom | LG/TL | target | met | same state |",
        "|---|---|---|--:|--:|--:|---|---|---|",
    ]
    for r in rows:
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else "-"
        met = {True: "yes", False: "**no**", None: "-"}[r.target_ok]
        same = {True: "yes", False: "**DIFF**", None: "-"}[r.same_state]
        lg = _cell(r.langgraph, r.langgraph_na, footnotes)
        tl = _cell(r.threadloom, r.threadloom_na, footnotes)
        out.append(
            f"| {r.workload} | {r.case} | {r.metric} | {lg} | {tl} | {ratio} "
            f"| {r.target or '-'} | {met if r.target else '-'} | {same} |"
        )
    if footnotes:
        out += [""] + [f"[{i + 1}] {reason}" for i, reason in enumerate(footnotes)]
    out += ["", "```", *_summary_lines(rows), "```"]
    return "\n".join(out)


def write_json(path: str, rows: list[Row], env: dict[str, Any]) -> None:
    """``results.json``: the environment plus one object per row."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as fh:
        data = {"environment": env, "summary": summarize(rows), "rows": [r.as_dict() for r in rows]}
        json.dump(data, fh, indent=1)


def write_plots(out_dir: str, rows: list[Row]) -> list[str]:
    """Ratio bar charts per workload and the storage growth plot; returns written paths."""
    from bench import plots

    return plots.write_all(out_dir, rows)

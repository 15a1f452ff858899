"""``python -m bench``: run every workload on LangGraph and threadloom, print and save.

``--quick`` runs a tiny version of everything in seconds (what CI exercises);
``--only`` picks workloads by name. Results go to ``bench/out/results.json``,
``bench/out/results.txt``, ``results.md`` and PNG plots in ``bench/out/``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any

from bench import floor, report
from bench.harness import Config, Row, run_cases
from bench.sides import sides
from bench.workloads import WORKLOADS, collect

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes")
    p.add_argument("--only", nargs="+", choices=list(WORKLOADS), help="run only these workloads")
    p.add_argument(
        "--case",
        nargs="+",
        metavar="SUBSTR",
        help="run only cases whose name contains one of these (e.g. postgres/sync)",
    )
    p.add_argument(
        "--reps",
        type=int,
        default=3,
        help="runs per whole-run timing (median); >= 2 also runs sides ABBA",
    )
    p.add_argument("--out", default=OUT_DIR, help="output directory (results.json, *.png)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("-v", "--verbose", action="store_true", help="print tracebacks of n/a errors")
    return p.parse_args(argv)


def run(
    quick: bool = False,
    only: list[str] | None = None,
    reps: int = 3,
    case: list[str] | None = None,
    out_dir: str | None = OUT_DIR,
    plots: bool = True,
    verbose: bool = False,
    echo: bool = True,
) -> dict[str, Any]:
    """Run the bench in-process; returns ``{"environment", "rows", "table", "files"}``."""
    say = (lambda msg: print(msg, file=sys.stderr, flush=True)) if echo else None
    t0 = time.perf_counter()
    load_start = report.load_average()
    with tempfile.TemporaryDirectory(prefix="tlbench-") as workdir:
        reps = 1 if quick else max(1, reps)
        cfg = Config(quick=quick, reps=reps, workdir=workdir, verbose=verbose)
        rows: list[Row] = run_cases(collect(cfg, only, case), sides(), cfg, progress=say)
        rows = floor.bound_rows(rows)
    env = report.environment(quick, reps, round(time.perf_counter() - t0, 1), load_start)
    table = report.format_table(rows, env)
    files: list[str] = []
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        json_path = os.path.join(out_dir, "results.json")
        report.write_json(json_path, rows, env)
        with open(os.path.join(out_dir, "results.txt"), "w") as fh:
            fh.write(table + "\n")
        with open(os.path.join(out_dir, "results.md"), "w") as fh:
            fh.write(report.format_markdown(rows, env) + "\n")
        files.append(json_path)
        if plots:
            files += report.write_plots(out_dir, rows)
    return {"environment": env, "rows": rows, "table": table, "files": files}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(
        quick=args.quick,
        only=args.only,
        reps=args.reps,
        case=args.case,
        out_dir=args.out,
        plots=not args.no_plots,
        verbose=args.verbose,
    )
    print(result["table"])
    for path in result["files"]:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

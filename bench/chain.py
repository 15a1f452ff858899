"""Per-superstep cost of the ``superstep`` workload's 10-node chain on one side,
optionally under cProfile: a quick tool for working on the hot path (the
side-by-side numbers come from ``python -m bench --only superstep``).

    python -m bench.chain memory|sqlite-normal|sqlite-full|postgres|none [sync|async|exit]
        [--lib threadloom|langgraph] [-n 200] [--profile] [--sort tottime] [--top 35]

Savers are opened exactly as the bench opens them (Postgres needs
THREADLOOM_BENCH_PG or THREADLOOM_TEST_PG).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time

from bench.sides import sides
from bench.workloads.common import invoke, thread
from bench.workloads.superstep import NODES, build_chain


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind")
    ap.add_argument("durability", nargs="?", default="sync")
    ap.add_argument("--lib", default="threadloom", choices=["threadloom", "langgraph"])
    ap.add_argument("-n", type=int, default=200, help="timed invokes (distinct threads)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--sort", default="tottime")
    ap.add_argument("--top", type=int, default=35)
    args = ap.parse_args()
    side = next(s for s in sides() if s.name == args.lib)
    durability = "-" if args.kind == "none" else args.durability
    with tempfile.TemporaryDirectory() as tmp, side.saver(args.kind, tmp) as saver:
        graph = build_chain(side).compile(checkpointer=saver)

        def run(n: int, offset: int) -> None:
            for i in range(n):
                invoke(graph, {"count": 0}, thread(f"chain-{i + offset}"), durability)

        run(10, 10_000)  # warm-up
        t0 = time.perf_counter()
        run(args.n, 0)
        per_step = (time.perf_counter() - t0) / args.n / NODES * 1e6
        print(f"{args.lib} {args.kind}/{durability}: {per_step:.0f} us/step")
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            run(args.n, 20_000)
            profile.disable()
            pstats.Stats(profile).sort_stats(args.sort).print_stats(args.top)


if __name__ == "__main__":
    main()

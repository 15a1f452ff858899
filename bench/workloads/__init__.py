"""The bench workloads, in report order; each module exposes ``cases(cfg)``."""

from __future__ import annotations

import importlib

from bench.harness import Case, Config

__all__ = ["WORKLOADS", "collect"]

WORKLOADS = {
    "superstep": "bench.workloads.superstep",
    "asuperstep": "bench.workloads.asuperstep",
    "fanout": "bench.workloads.fanout",
    "conversation": "bench.workloads.conversation",
    "saver": "bench.workloads.saver_raw",
    "lg_shapes": "bench.workloads.lg_shapes",
}


def collect(
    cfg: Config, only: list[str] | None = None, case: list[str] | None = None
) -> list[Case]:
    """Every case of the selected workloads (all when ``only`` is empty).

    ``case`` keeps only cases whose name (``saver/durability``) contains one of
    the given substrings, e.g. ``postgres/sync``.
    """
    cases: list[Case] = []
    for name, module in WORKLOADS.items():
        if only and name not in only:
            continue
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        cases += [c for c in mod.cases(cfg) if not case or any(k in c.name for k in case)]
    return cases

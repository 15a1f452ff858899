"""The bench workloads, in report order; each module exposes ``cases(cfg)``."""

from __future__ import annotations

import importlib

from bench.harness import Case, Config

__all__ = ["WORKLOADS", "collect"]

WORKLOADS = {
    "superstep": "bench.workloads.superstep",
    "fanout": "bench.workloads.fanout",
    "conversation": "bench.workloads.conversation",
    "saver": "bench.workloads.saver_raw",
    "lg_shapes": "bench.workloads.lg_shapes",
}


def collect(cfg: Config, only: list[str] | None = None) -> list[Case]:
    """Every case of the selected workloads (all when ``only`` is empty)."""
    cases: list[Case] = []
    for name, module in WORKLOADS.items():
        if only and name not in only:
            continue
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        cases += mod.cases(cfg)
    return cases

"""Helpers shared by the graph workloads: the saver x durability matrix and invoking."""

from __future__ import annotations

from typing import Any

from bench.harness import Config
from bench.sides import SAVER_KINDS, pg_url

__all__ = ["invoke", "saver_matrix", "thread"]


def saver_matrix(cfg: Config) -> list[tuple[str, str]]:
    """(saver kind, durability) pairs: "none" once, every saver with sync and async."""
    pairs = [("none", "-")]
    for kind in SAVER_KINDS[1:]:
        if kind == "postgres" and not pg_url():
            continue
        pairs += [(kind, "sync"), (kind, "async")]
    return pairs


def thread(tid: str, **extra: Any) -> dict[str, Any]:
    """A run config for thread ``tid``."""
    return {"configurable": {"thread_id": tid}, **extra}


def invoke(graph: Any, inp: Any, config: dict[str, Any], durability: str) -> Any:
    """``graph.invoke`` with ``durability`` unless it is "-" (no checkpointer)."""
    if durability == "-":
        return graph.invoke(inp, config)
    return graph.invoke(inp, config, durability=durability)

"""Workload 4: raw saver throughput, no graph runtime involved.

Medians of per-call times. A chain of checkpoints on one thread, each with 5 channels of ~1 KB that all
change, then ``put_writes`` of two ~1 KB writes per checkpoint, then reading:
``get_tuple`` of the latest checkpoint and ``list(limit=20)``. Both sides build
their checkpoints with their own ``empty_checkpoint``/``uuid6``/``get_next_version``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from typing import Any

from bench.harness import Case, Config, MetricSpec, Outcome, median_seconds
from bench.sides import Side, pg_url

__all__ = ["cases"]

CHANNELS = tuple(f"ch{j}" for j in range(5))
FILLER = "0123456789abcdef" * 64


def _payload(i: int, j: int) -> dict[str, Any]:
    text = f"checkpoint {i} channel {j} "
    return {"text": (text + FILLER)[:1000], "n": i * 10 + j}


def _config(tid: str, checkpoint_id: str | None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": tid, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _put_chain(
    side: Side, saver: Any, tid: str, count: int
) -> tuple[list[dict[str, Any]], list[float]]:
    """Put ``count`` checkpoints as a parent chain; returns put's configs and timings."""
    empty = side.get("empty_checkpoint")
    versions: dict[str, Any] = dict.fromkeys(CHANNELS)
    config = _config(tid, None)
    configs, times = [], []
    for i in range(count):
        ckpt = empty()
        ckpt["id"] = side.new_id()
        new_versions = {ch: saver.get_next_version(versions[ch], None) for ch in CHANNELS}
        versions.update(new_versions)
        ckpt["channel_values"] = {ch: _payload(i, j) for j, ch in enumerate(CHANNELS)}
        ckpt["channel_versions"] = dict(versions)
        ckpt["versions_seen"] = {"node": dict(versions)}
        ckpt["updated_channels"] = list(CHANNELS)
        meta = {"source": "loop", "step": i, "parents": {}}
        t0 = time.perf_counter()
        config = saver.put(config, ckpt, meta, new_versions)
        times.append(time.perf_counter() - t0)
        configs.append(config)
    return configs, times


def _put_writes(saver: Any, configs: list[dict[str, Any]]) -> list[float]:
    times = []
    for i, config in enumerate(configs):
        writes = [("ch0", _payload(i, 10)), ("ch1", _payload(i, 11))]
        t0 = time.perf_counter()
        saver.put_writes(config, writes, f"task-{i:06d}", "~__pregel_pull, node")
        times.append(time.perf_counter() - t0)
    return times


def _run(kind: str):
    def fn(side: Side, cfg: Config) -> Outcome:
        count = cfg.pick(1000, 40)
        side.get("empty_checkpoint")
        with tempfile.TemporaryDirectory(dir=cfg.workdir) as tmp:
            with side.saver(kind, tmp) as saver:
                _put_chain(side, saver, "warmup", 5)
                configs, put_times = _put_chain(side, saver, "raw", count)
                write_times = _put_writes(saver, configs)
                latest = _config("raw", None)
                tup: list = []
                n_get, n_list = cfg.pick((200, 50), (10, 5))
                get_s = median_seconds(
                    lambda: tup.append(saver.get_tuple(latest)), n_get, 5, collect=False
                )
                list_s = median_seconds(
                    lambda: list(saver.list(latest, limit=20)), n_list, 2, collect=False
                )
                listed = list(saver.list(latest))
        final = {
            "latest": tup[-1].checkpoint["channel_values"],
            "pending_writes": sorted((w[1], repr(w[2])) for w in tup[-1].pending_writes or []),
            "checkpoints": len(listed),
        }
        values = {
            "put us/op": statistics.median(put_times) * 1e6,
            "put_writes us/op": statistics.median(write_times) * 1e6,
            "get_tuple us": get_s * 1e6,
            "list(limit=20) us": list_s * 1e6,
        }
        return Outcome(values, final=final)

    return fn


def cases(cfg: Config) -> list[Case]:
    kinds = ["memory", "sqlite-normal", "sqlite-full"] + (["postgres"] if pg_url() else [])
    keys = ("put us/op", "put_writes us/op", "get_tuple us", "list(limit=20) us")
    return [Case("saver", k, _run(k), [MetricSpec(key, "us") for key in keys]) for k in kinds]

"""The load test, small: 2 processes x 6 threads x 5 steps plus contended hot threads.

The full version (4 x 50 x 20, throughput report) is
``python -m tests.concurrency.load [--backend postgres]``.
"""

from __future__ import annotations

import pytest

from tests.concurrency.backends import make_spec
from tests.concurrency.load import run


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_small_load_loses_and_duplicates_nothing(kind, tmp_path, request):
    spec = make_spec(kind, str(tmp_path), request)
    if kind == "postgres":
        spec["pool"] = True
    report = run(spec, procs=2, threads=6, steps=5, hot=2, rounds=4, workers=4)
    assert report["problems"] == []  # linear histories, per-run checkpoints, state
    # 12 own threads + 2 processes x 8 hot attempts; every attempt is accounted for
    assert report["runs_ok"] + report["rejected"] + report["stopped"] == 12 + 16
    assert report["runs_ok"] >= 12  # own threads are never contended

"""Load benchmark: ``python -m bench.load [--backend sqlite|postgres] ...``.

Several processes run graphs against one store with some threads contended
(4 processes x 50 threads x 20 steps by default, loopback only) and report
throughput and latency, after checking that no checkpoint was lost or
duplicated and that every contention was answered per its multitask strategy.
The driver lives with its test (tests/concurrency/load.py, which CI runs small);
this entry point keeps every benchmark under ``bench/``.
"""

from __future__ import annotations

from tests.concurrency.load import main

if __name__ == "__main__":
    main()

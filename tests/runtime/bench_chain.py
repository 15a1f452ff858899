"""Per-superstep overhead of a 10-node chain (no checkpointer): LangGraph vs threadloom.

Run: .venv/bin/python tests/runtime/bench_chain.py [langgraph] [threadloom]
"""

import importlib
import sys
import time


def build(name, n=10):
    P = importlib.import_module(f"{name}.pregel")
    C = importlib.import_module(f"{name}.channels")
    nodes = {
        f"n{i}": P.NodeBuilder().subscribe_only(f"c{i}").do(lambda x: x + 1).write_to(f"c{i + 1}")
        for i in range(n)
    }
    ch = {f"c{i}": C.LastValue(int) for i in range(n + 1)}
    return P.Pregel(nodes=nodes, channels=ch, input_channels="c0", output_channels=f"c{n}")


def bench(name, reps=300):
    app = build(name)
    for _ in range(20):
        app.invoke(0)
    t = time.perf_counter()
    for _ in range(reps):
        app.invoke(0)
    dt = time.perf_counter() - t
    return dt / reps / 10 * 1e6


if __name__ == "__main__":
    for name in sys.argv[1:] or ["langgraph", "threadloom"]:
        print(name, f"{bench(name):.1f} us/step")

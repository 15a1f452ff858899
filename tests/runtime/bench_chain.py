"""Per-superstep overhead of a 10-node chain (no checkpointer): LangGraph vs threadloom.

Reports the best of several rounds, in CPU time of this process (the machine may be
shared). Run: .venv/bin/python tests/runtime/bench_chain.py [langgraph] [threadloom]
"""

import importlib
import sys
import time


def build(name: str, n: int = 10):
    p = importlib.import_module(f"{name}.pregel")
    c = importlib.import_module(f"{name}.channels")
    nodes = {
        f"n{i}": p.NodeBuilder().subscribe_only(f"c{i}").do(lambda x: x + 1).write_to(f"c{i + 1}")
        for i in range(n)
    }
    channels = {f"c{i}": c.LastValue(int) for i in range(n + 1)}
    return p.Pregel(nodes=nodes, channels=channels, input_channels="c0", output_channels=f"c{n}")


def bench(name: str, reps: int = 200, rounds: int = 5) -> float:
    app = build(name)
    for _ in range(20):
        app.invoke(0)
    best = float("inf")
    for _ in range(rounds):
        t = time.process_time()
        for _ in range(reps):
            app.invoke(0)
        best = min(best, (time.process_time() - t) / reps / 10 * 1e6)
    return best


if __name__ == "__main__":
    for name in sys.argv[1:] or ["langgraph", "threadloom"]:
        print(name, f"{bench(name):.1f} us/step (CPU)")

"""Quick comparison with LangGraph's JsonPlusSerializer (a script, not a test).

Run: .venv/bin/python tests/serde/bench_serde_vs_langgraph.py
Reports the best of several rounds of CPU time (the machine may be shared) for dumps and
loads of 2,000 message dicts, and of 2,000 langchain-core messages.
"""

from __future__ import annotations

import time
import uuid

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from threadloom.checkpoint.serde import MsgpackSerializer


def best(fn, rounds: int = 7, n: int = 10) -> float:
    times = []
    for _ in range(rounds):
        t = time.process_time()
        for _ in range(n):
            fn()
        times.append((time.process_time() - t) / n)
    return min(times)


def bench(name: str, ser, value) -> tuple[float, float]:
    tag, data = ser.dumps_typed(value)
    d = best(lambda: ser.dumps_typed(value))
    lo = best(lambda: ser.loads_typed((tag, data)))
    print(f"{name:40s} dumps {d * 1e3:7.2f} ms  loads {lo * 1e3:7.2f} ms  {len(data):8d} B  {tag}")
    return d, lo


def main() -> None:
    msgs = [
        {
            "role": "user" if i % 2 else "assistant",
            "content": f"message number {i} " * 8,
            "id": str(uuid.uuid4()),
            "metadata": {"tokens": i * 3, "score": i / 7, "tags": ["a", "b"]},
        }
        for i in range(2000)
    ]
    lg = bench("langgraph JsonPlusSerializer, dicts", JsonPlusSerializer(), msgs)
    raw = bench(
        "threadloom, dicts, no compression", MsgpackSerializer(compress_threshold=None), msgs
    )
    z = bench("threadloom, dicts, default (zstd)", MsgpackSerializer(), msgs)
    print(f"  LG/threadloom uncompressed: dumps {lg[0] / raw[0]:.2f}x  loads {lg[1] / raw[1]:.2f}x")
    print(f"  LG/threadloom default:      dumps {lg[0] / z[0]:.2f}x  loads {lg[1] / z[1]:.2f}x")

    from langchain_core.messages import AIMessage, HumanMessage

    lc = [
        HumanMessage(f"q {i} " * 8, id=str(i)) if i % 2 else AIMessage(f"a {i} " * 8, id=str(i))
        for i in range(2000)
    ]
    lg = bench("langgraph JsonPlusSerializer, messages", JsonPlusSerializer(), lc)
    raw = bench(
        "threadloom, messages, no compression", MsgpackSerializer(compress_threshold=None), lc
    )
    z = bench("threadloom, messages, default (zstd)", MsgpackSerializer(), lc)
    print(f"  LG/threadloom uncompressed: dumps {lg[0] / raw[0]:.2f}x  loads {lg[1] / raw[1]:.2f}x")
    print(f"  LG/threadloom default:      dumps {lg[0] / z[0]:.2f}x  loads {lg[1] / z[1]:.2f}x")


if __name__ == "__main__":
    main()

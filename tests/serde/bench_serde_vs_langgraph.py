"""Quick comparison with LangGraph's JsonPlusSerializer (a script, not a test).

Run: .venv/bin/python tests/serde/bench_serde_vs_langgraph.py
Reports the best of several rounds of CPU time (the machine may be shared) for dumps and
loads of 2,000 message dicts, and of 2,000 langchain-core messages, then per value type
(one HumanMessage, AIMessage with a tool call, ToolMessage, plain pydantic model): bytes,
bytes after zstd and microseconds per dumps / loads.
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


def one_by_one() -> None:
    """Bytes and CPU per single value: what a pending write of one message costs."""
    import random

    import zstandard
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from pydantic import BaseModel, Field

    from threadloom.checkpoint.serde import register

    class Item(BaseModel):
        name: str
        qty: int = 1
        tags: list[str] = Field(default_factory=list)
        note: str | None = None

    register(Item, name="bench.Item")
    rng = random.Random(7)
    words = "the of and to in is for on that weather search result tool call model".split()

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n // 4))[:n]

    call = {"name": "search", "args": {"q": "weather in paris"}, "id": "call_abc123"}
    values = {
        "HumanMessage": HumanMessage(content=text(200), id="h-5"),
        "AIMessage+tool call": AIMessage(content=text(200), id="a-5", tool_calls=[call]),
        "ToolMessage": ToolMessage(content=text(200), tool_call_id="call_abc123", id="t-5"),
        "pydantic Item": Item(name="widget", qty=3),
    }
    zstd = zstandard.ZstdCompressor(level=1)
    for side, ser in (("threadloom", MsgpackSerializer(compress_threshold=None)),
                      ("langgraph", JsonPlusSerializer())):  # fmt: skip
        for name, value in values.items():
            tag, data = ser.dumps_typed(value)
            d = best(lambda v=value, s=ser: s.dumps_typed(v), n=2000)
            lo = best(lambda t=tag, b=data, s=ser: s.loads_typed((t, b)), n=2000)
            print(
                f"{side:10s} {name:20s} {len(data):4d} B (zstd {len(zstd.compress(data)):4d})"
                f"  dumps {d * 1e6:6.2f} us  loads {lo * 1e6:6.2f} us"
            )


if __name__ == "__main__":
    main()
    one_by_one()

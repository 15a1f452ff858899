"""Worker process for the demo's crash scene: runs one turn until it is killed.

``python -m threadloom.demo.crash DB THREAD TEXT``
"""

from __future__ import annotations

import sys

from threadloom.demo.agent import build_graph
from threadloom.demo.run import open_saver


def main(argv: list[str]) -> int:
    db, thread, text = argv
    graph = build_graph(open_saver(db))
    config = {"configurable": {"thread_id": thread}}
    graph.invoke({"messages": [{"role": "user", "content": text}]}, config)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

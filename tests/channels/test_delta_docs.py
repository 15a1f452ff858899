"""docs/graph.md, "Delta channels": the example runs as written and prints what it shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "graph.md"


def test_delta_channel_example_runs() -> None:
    text = DOC.read_text()
    section = text[text.index("### Delta channels") :]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None, "docs/graph.md lost its DeltaChannel example"
    shown = [line[2:] for line in block.group(1).splitlines() if line.startswith("# ")]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.group(1), str(DOC), "exec", dont_inherit=True), {"__name__": "doc"})
    assert out.getvalue().splitlines() == shown

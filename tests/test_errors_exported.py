"""Every threadloom error class the docs name can be imported from
``threadloom.errors``: users write ``except threadloom.errors.X`` from what a
page says, wherever the class happens to be defined."""

from __future__ import annotations

import builtins
import re
from pathlib import Path

import threadloom.errors as errors

ROOT = Path(__file__).resolve().parents[1]


def _documented_error_names() -> set[str]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    text = "\n".join(p.read_text() for p in pages)
    return set(re.findall(r"`(?:[\w.]+\.)?([A-Z]\w*Error)\b", text))


def _threadloom_classes() -> set[str]:
    names = set()
    for path in (ROOT / "threadloom").rglob("*.py"):
        names.update(re.findall(r"^class (\w+Error)\b", path.read_text(), re.M))
    return names


def test_documented_threadloom_errors_are_in_threadloom_errors() -> None:
    documented = _documented_error_names() - set(dir(builtins))
    ours = documented & _threadloom_classes()
    assert {"IdListError", "MermaidRenderError", "CorruptBlobError"} <= ours
    missing = sorted(name for name in ours if not hasattr(errors, name))
    assert not missing, f"documented but not importable from threadloom.errors: {missing}"

"""The optimistic driver's restart check runs on every Python the package
supports (pyproject: >=3.10). Generators have ``gi_suspended`` only from 3.11;
on 3.10 every Postgres write failed with AttributeError before any SQL was sent.

The check is run under a Python 3.10 interpreter when this machine has one
(the rest of the suite runs on the project's venv Python)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from threadloom.checkpoint.storage import drive

ROOT = Path(__file__).resolve().parents[2]
SNIPPET = """
from threadloom.checkpoint.storage import drive
def flow(a, b):
    yield a
    return b
f = flow([1], 2)
assert drive._restarter(f) is not None, "a fresh flow can be restarted"
next(f)
assert drive._restarter(f) is None, "a started flow cannot"
print("ok")
"""


def _python310() -> str | None:
    pyenv = os.path.expanduser("~/.pyenv/versions/3.10.*/bin/python")
    found = next(iter(sorted(glob.glob(pyenv))), None)
    if found:
        return found
    found = shutil.which("python3.10")  # (a pyenv shim may name a version not installed)
    return found if found and "/shims/" not in found else None


def test_restart_check_on_this_python() -> None:
    def flow(a: list, b: int):
        yield a
        return b

    fresh = flow([1], 2)
    assert drive._restarter(fresh) is not None
    next(fresh)
    assert drive._restarter(fresh) is None


@pytest.mark.skipif(sys.version_info[:2] == (3, 10), reason="the suite itself runs on 3.10")
def test_restart_check_on_python_310() -> None:
    python = _python310()
    if python is None:
        pytest.skip("no Python 3.10 interpreter on this machine")
    out = subprocess.run(
        [python, "-c", SNIPPET],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "ModuleNotFoundError" in out.stderr:
        pytest.skip(f"Python 3.10 lacks a dependency: {out.stderr.strip().splitlines()[-1]}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"

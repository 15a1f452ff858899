"""``next_version`` keeps LangGraph's string format (``f"{n:032}.{random():016}"``)."""

from __future__ import annotations

import random
import re

from hypothesis import given
from hypothesis import strategies as st

from threadloom.checkpoint.ids import next_version


@given(st.floats(min_value=0.0, max_value=1.0, exclude_max=True))
def test_fraction_formatting_matches_langgraphs(x: float) -> None:
    assert repr(x).zfill(16) == f"{x:016}"


@given(st.integers(min_value=0, max_value=10**12), st.integers(min_value=0, max_value=2**32))
def test_next_version_counts_and_matches_the_format(n: int, seed: int) -> None:
    random.seed(seed)
    current = f"{n:032}.{random.random():016}"
    out = next_version(current)
    assert re.fullmatch(r"\d{32}\.[0-9.e-]{16,}", out)
    assert int(out[:32]) == n + 1
    assert next_version(None).startswith(f"{1:032}.")
    assert next_version(n).startswith(f"{n + 1:032}.")

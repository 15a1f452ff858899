"""stable_key: same value, same key, in any process and insertion order."""

from __future__ import annotations

import dataclasses
import enum
import os
import subprocess
import sys

import pytest

from threadloom.checkpoint.serde import stable_key
from threadloom.errors import SerializationError


@dataclasses.dataclass
class Unregistered:  # keys are one-way: hashing needs no registration
    a: int


class Kind(enum.Enum):
    A = "a"


def test_key_shape_and_determinism():
    key = stable_key({"x": [1, 2], "y": (3,)})
    assert len(key) == 32 and int(key, 16) >= 0
    assert key == stable_key({"y": (3,), "x": [1, 2]})


def test_distinguishes_values_and_types():
    keys = {
        stable_key(v) for v in (1, 1.0, "1", (1,), [1], {1}, b"1", None, True, {1: 1}, {"1": 1})
    }
    assert len(keys) == 11


def test_unregistered_structured_values_can_be_hashed():
    assert stable_key(Unregistered(1)) == stable_key(Unregistered(1))
    assert stable_key(Unregistered(1)) != stable_key(Unregistered(2))
    assert stable_key({Kind.A: 1}) == stable_key({Kind.A: 1})


def test_unsupported_values_raise():
    with pytest.raises(SerializationError) as info:
        stable_key({"fn": [object()]})
    assert info.value.path == "fn[0]"


def test_same_key_across_processes_despite_hash_randomization():
    code = (
        "from threadloom.checkpoint.serde import stable_key;"
        "print(stable_key({'s': {'alpha', 'beta', 'gamma', 'delta'}, 7: frozenset({'x', 'y'})}))"
    )
    keys = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        keys.add(out.stdout.strip())
    assert len(keys) == 1


def test_cache_policy_default_key_uses_stable_key():
    from threadloom.types import CachePolicy

    policy = CachePolicy()
    assert policy.key_func({"b": 1, "a": 2}) == policy.key_func({"a": 2, "b": 1})

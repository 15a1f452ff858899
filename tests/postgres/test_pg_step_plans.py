"""The per-step plans built once (#9, session 10): the optimistic fence and the
base-checked checkpoint upsert keep one text per schema, checkpoint ids are
packed once per id, and the driver's iterator test is answered per class.
What is built once must still differ where its inputs differ (schema, base or
none) and give exactly what building it afresh gives."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from threadloom.checkpoint.lease import ops as lo
from threadloom.checkpoint.lease.postgres import fence
from threadloom.checkpoint.postgres import idpack
from threadloom.checkpoint.postgres import optimistic as opt
from threadloom.checkpoint.postgres.queries import SQL
from threadloom.checkpoint.storage import ops, rereads
from threadloom.checkpoint.storage.ops import CheckpointRow

ID = "1f0c2a9e-5b7d-6e11-8000-0123456789ab"
PARENT = "1f0c2a9e-5b7d-6e10-8000-0123456789ab"


def _fence(sql: SQL, token: str = "tok") -> Any:
    [stmt] = opt._check_lease(lo.CheckLease("t-1", token, 30_000), sql, None)  # type: ignore[arg-type]
    return stmt


def test_the_fence_text_is_per_schema_and_its_parameters_per_lease() -> None:
    one, two = SQL("s_one"), SQL("s_two")
    a, b, c = _fence(one), _fence(two), _fence(one, "other")
    assert '"s_one".tl_leases' in a.sql and '"s_two".tl_leases' in b.sql
    assert a.sql is c.sql  # built once per schema
    ctes, params = fence(lo.CheckLease("t-1", "other", 30_000), one)
    assert ctes in c.sql and c.params == params
    assert a.params != c.params


def _save(sql: SQL, base: str | None) -> ops.SaveCheckpoint:
    row = CheckpointRow("t-1", "", ID, PARENT, "~r", b"data", {"step": 1}, None)
    return ops.SaveCheckpoint(row=row, refs=(), blobs=(), base=base)


def test_the_upsert_checks_the_base_only_when_the_put_has_one() -> None:
    sql = SQL("s_upsert")
    plain = opt._checked_upsert(_save(sql, None), sql)
    based = opt._checked_upsert(_save(sql, PARENT), sql)
    assert plain is not None and based is not None
    assert opt.LOCK_SLOT in plain.sql and "EXISTS" not in plain.sql
    assert opt.LOCK_SLOT not in based.sql and "EXISTS" in based.sql
    assert based.params[-3:] == ("t-1", "", idpack.pack_ordered(PARENT))
    assert based.params[:-3] == plain.params
    other = SQL("s_other")
    assert '"s_other".checkpoints' in opt._checked_upsert(_save(other, PARENT), other).sql  # type: ignore[union-attr]


def test_a_save_without_blobs_or_refs_is_the_checked_upsert_alone() -> None:
    sql = SQL("s_row")
    batch, result = opt._save_checkpoint(_save(sql, PARENT), sql)
    assert [s.sql for s in batch] == [opt._checked_upsert(_save(sql, PARENT), sql).sql]  # type: ignore[union-attr]
    assert result == ops.SaveResult(frozenset(), ())
    no_row = ops.SaveCheckpoint(row=None, refs=(), blobs=(), base=None)
    assert opt._save_checkpoint(no_row, sql)[0] == []


@pytest.mark.parametrize(
    "value", [ID, PARENT, "step-1", "", "1f0c2a9e-5b7d-6e11-8000-0123456789aB", "z" * 40]
)
def test_packed_ids_are_what_packing_afresh_gives(value: str) -> None:
    assert idpack.pack_ordered(value) == idpack._pack_ordered(value)
    assert idpack.pack_ordered(value) == idpack._pack_ordered(value)  # from the memo


def test_the_id_memo_stays_bounded() -> None:
    for i in range(600):
        assert idpack.pack_ordered(f"id-{i}") == idpack._pack_ordered(f"id-{i}")
    assert len(idpack._ordered) <= 256


class _Counter:
    def __init__(self) -> None:
        self.n = 0

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> int:
        self.n += 1
        return self.n


class _Proxy:
    """Claims to be another class (as some lazy proxies do)."""

    def __init__(self, claimed: type) -> None:
        self._claimed = claimed

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return self._claimed


def test_the_iterator_test_is_remembered_per_class_only() -> None:
    for _ in range(2):  # the second answer comes from the memo
        assert rereads.consumable(_Counter(), 4)
        assert rereads.consumable([(1, _Counter())], 4)
        assert not rereads.consumable(object(), 4)
    assert isinstance(_Proxy(_Counter), Iterator)
    assert rereads.consumable(_Proxy(_Counter), 4)
    assert _Proxy not in rereads._ITERATOR  # its answer came from the class it claims
    assert not rereads.consumable(_Proxy(object), 4)

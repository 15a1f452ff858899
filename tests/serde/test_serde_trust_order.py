"""Under one stored name the class most recently registered or allowlisted wins;
allowlisted classes nobody references any more drop out (held weakly)."""

from __future__ import annotations

import gc

import pytest

from threadloom.checkpoint.serde import MsgpackSerializer
from threadloom.checkpoint.serde import resolver as resolver_module
from threadloom.checkpoint.serde.registry import Registry, entry_for
from threadloom.errors import SerializationError

_CELL = """
import dataclasses
@dataclasses.dataclass
class Note:
    text: str
"""


def _define(module: str = "tests.serde.trust_order") -> type:
    """A fresh ``Note`` class with the same module and qualified name on every call."""
    scope: dict = {"__name__": module}
    exec(compile(_CELL, "<cell>", "exec", dont_inherit=True), scope)
    return scope["Note"]


def test_a_newer_allowlisted_class_beats_an_older_registration() -> None:
    registry = Registry()
    old, new = _define(), _define()
    registry.add(entry_for(old))  # registered once, in a cell not run again
    serde = MsgpackSerializer(registry=registry)
    stored = serde.dumps_typed(old("a"))
    assert type(serde.loads_typed(stored)) is old
    widened = serde.with_allowlist([new])  # the state cell, run again, compiles
    assert type(widened.loads_typed(stored)) is new
    assert widened.with_allowlist([new]) is widened  # nothing changed: no copy
    assert widened.dumps_typed(old("b"))  # the old class still stores


def test_a_later_registration_beats_an_earlier_allowlist() -> None:
    registry = Registry()
    old, new = _define(), _define()
    serde = MsgpackSerializer(allowed=[old], registry=registry)
    stored = serde.dumps_typed(old("a"))
    assert type(serde.loads_typed(stored)) is old  # cached per name...
    registry.add(entry_for(new))
    assert type(serde.loads_typed(stored)) is new  # ...and dropped by the registration
    again = serde.with_allowlist([old])  # trusting the old one again makes it the latest
    assert type(again.loads_typed(stored)) is old


def test_allowlisted_classes_nobody_references_drop_out() -> None:
    kept = _define()
    serde = MsgpackSerializer(allowed=[kept])
    stored = serde.dumps_typed(kept("a"))
    for _ in range(200):  # a graph built per request by a factory function
        serde = serde.with_allowlist([_define("tests.serde.factory")], weak=True)
    gc.collect()
    assert len(serde.allowed) == 1  # before: 201 classes, and O(N) work per widening
    assert kept in serde.allowed
    assert type(serde.loads_typed(stored)) is kept  # still referenced: still trusted


def test_a_dropped_class_is_never_revived() -> None:
    gone = _define("tests.serde.gone")
    serde = MsgpackSerializer().with_allowlist([gone], weak=True)  # as a compile trusts it
    stored = MsgpackSerializer(allowed=[gone]).dumps_typed(gone("a"))  # serde caches nothing
    del gone
    gc.collect()
    assert serde.allowed == ()
    with pytest.raises(SerializationError, match="not registered|tests.serde.gone"):
        serde.loads_typed(stored)
    # another class later defined under the name is not trusted by this serializer
    other = _define("tests.serde.gone")
    with pytest.raises(SerializationError):
        serde.loads_typed(stored)
    assert type(serde.with_allowlist([other]).loads_typed(stored)) is other


def _older_live(module: str) -> tuple[type, MsgpackSerializer, tuple[str, bytes]]:
    """A class the user allowlisted, a value of it stored, and a serializer whose
    compile then trusted a newer class under its name that has died since."""
    first, newer = _define(module), _define(module)
    serde = MsgpackSerializer(allowed=[first]).with_allowlist([newer], weak=True)
    del newer
    stored = serde.dumps_typed(first("a"))
    gc.collect()  # the newer class died: nothing holds it
    return first, serde, stored


def test_an_older_live_class_serves_its_name_when_the_newest_dies() -> None:
    first, serde, stored = _older_live("tests.serde.fallback")
    assert type(serde.loads_typed(stored)) is first


def test_widening_derives_entries_for_the_new_classes_only(monkeypatch) -> None:
    held = [_define(f"tests.serde.many{i}") for i in range(300)]
    serde = MsgpackSerializer(allowed=held)
    calls: list[type] = []
    real = resolver_module.entry_for

    def counting(cls, *args, **kwargs):
        calls.append(cls)
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(resolver_module, "entry_for", counting)
    fresh = _define("tests.serde.fresh")
    widened = serde.with_allowlist([*held, fresh])
    assert calls == [fresh]  # before: every allowlisted class was derived again
    assert len(widened.allowed) == 301


def test_two_classes_under_one_name_in_one_widening_are_stable() -> None:
    sub, parent = _define("tests.serde.pair"), _define("tests.serde.pair")
    serde = MsgpackSerializer().with_allowlist([sub, parent])
    stored = serde.dumps_typed(sub("a"))
    assert type(serde.loads_typed(stored)) is parent  # the last one under a name wins
    assert serde.with_allowlist([sub, parent]) is serde  # no copy on every compile


def test_pruning_keeps_an_older_live_class_under_its_name() -> None:
    first, serde, stored = _older_live("tests.serde.pruned")
    for i in range(200):  # other factory classes: pruning runs several times
        serde = serde.with_allowlist([_define("tests.serde.other")], weak=True)
        if i % 25 == 0:
            gc.collect()
    gc.collect()
    assert type(serde.loads_typed(stored)) is first


def test_refresh_false_adds_only_classes_not_trusted_yet() -> None:
    """A nested subgraph's run: it must not take a name back from its parent's class."""
    sub, parent = _define("tests.serde.nested"), _define("tests.serde.nested")
    serde = MsgpackSerializer().with_allowlist([sub, parent])
    stored = serde.dumps_typed(sub("a"))
    assert serde.with_allowlist([sub], refresh=False) is serde
    assert type(serde.with_allowlist([sub]).loads_typed(stored)) is sub  # refresh: sub wins
    newer = _define("tests.serde.nested")  # its cell run again: the new class is new
    assert type(serde.with_allowlist([sub, newer], refresh=False).loads_typed(stored)) is newer


def test_a_name_registered_for_another_class_stays_the_registrys() -> None:
    registry = Registry()
    note = _define("tests.serde.named")
    stable = _define("tests.serde.elsewhere")
    registry.add(entry_for(stable, name="tests.serde.named.Note"))  # a stable name, moved class
    serde = MsgpackSerializer(registry=registry).with_allowlist([note])  # compiled later
    stored = serde.dumps_typed(stable("a"))
    assert type(serde.loads_typed(stored)) is stable  # not a redefinition: no take-over


def test_classes_the_user_names_are_held_by_the_serializer() -> None:
    """``allowed=`` and a direct ``with_allowlist`` hold their classes: a reader
    whose class is built from config, with no instance yet, still revives it
    (only what a compile trusts is held weakly)."""
    writer_class = _define("tests.serde.dyn")
    stored = MsgpackSerializer(allowed=[writer_class]).dumps_typed(writer_class("a"))
    del writer_class
    reader = MsgpackSerializer(allowed=[_define("tests.serde.dyn")])  # nothing else holds it
    widened = MsgpackSerializer().with_allowlist([_define("tests.serde.dyn2")])
    gc.collect()
    gc.collect()
    assert type(reader.loads_typed(stored)).__qualname__ == "Note"
    assert len(widened.allowed) == 1
    compiled = MsgpackSerializer().with_allowlist([_define("tests.serde.dyn3")], weak=True)
    gc.collect()
    gc.collect()
    assert compiled.allowed == ()

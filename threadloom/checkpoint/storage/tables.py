"""Name and version tables of a keyframe interval (what a record's indices mean).

A keyframe starts the tables; each diff appends the channel/node names and
versions it introduces, so every record after it names them by a small int
index (:mod:`.record`). The tables in force after a record are kept on its
:class:`~.state.State` for its children.
"""

from __future__ import annotations

from typing import Any

from threadloom.checkpoint.storage.state import State

__all__ = ["fill_tables", "open_tables", "table_key"]


def table_key(value: Any) -> Any:
    """Table key: packed versions are tuples; anything else keeps its type (1 != 1.0)."""
    kind = type(value)
    if kind is tuple:
        return value
    return tuple(value) if kind is list else (kind.__name__, value)


def open_tables(prev: State | None) -> tuple[Any, ...]:
    """Names and versions of a chain of records (each use is a small int index):
    ``nref``/``vref`` give the index of a name/version, appending it to ``new_*``
    when the parent's table lacks it. The parent's tables are never mutated:
    added names go to a side index (rare), versions (nearly every record adds
    some) into a copy of the parent's index, which inline lookups then see."""
    if prev is None:
        ni, vi, nstart, vstart = {}, {}, 0, 0
    else:
        nstart, vstart = len(prev.names), len(prev.versions)
        index = prev.index  # read once: a concurrent put of a child may drop it
        if index is None:
            ni = {v: i for i, v in enumerate(prev.names)}
            vi = {table_key(v): i for i, v in enumerate(prev.versions)}
        else:
            ni, vi = index[0], dict(index[1])
    new_names: list[Any] = []
    new_versions: list[Any] = []
    nadd: dict[Any, int] = {}

    def nref(name: Any) -> int:
        i = ni.get(name)
        if i is None:
            i = nadd.get(name)
            if i is None:
                i = nadd[name] = nstart + len(new_names)
                new_names.append(name)
        return i

    def vref(value: Any) -> int:
        key = value if type(value) is tuple else table_key(value)
        i = vi.get(key)
        if i is None:
            i = vi[key] = vstart + len(new_versions)
            new_versions.append(value)
        return i

    def pairs(versions: dict[str, Any]) -> list[int]:
        """``{name: version}`` as ``[name index, version index, ...]`` (vref inline)."""
        out: list[int] = []
        app, get = out.append, vi.get
        for c, v in versions.items():
            app(ni[c] if c in ni else nref(c))
            key = v if type(v) is tuple else table_key(v)
            i = get(key)
            if i is None:
                i = vi[key] = vstart + len(new_versions)
                new_versions.append(v)
            app(i)
        return out

    return ni, nref, vref, pairs, new_names, new_versions, nadd, vi


def fill_tables(state: State, prev: State | None, tables: tuple[Any, ...]) -> None:
    """The tables in force after ``state``'s record, for its children."""
    ni, _, _, _, new_names, new_versions, nadd, vi = tables
    names, versions = (prev.names, prev.versions) if prev is not None else ([], [])
    if new_names:
        names = names + new_names
        ni = {**ni, **nadd}
    if new_versions:
        versions = versions + new_versions
    state.names, state.versions, state.index = names, versions, (ni, vi)

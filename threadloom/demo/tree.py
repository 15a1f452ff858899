"""ASCII rendering of a thread's checkpoint tree (used by the demo and ``threadloom tree``).

A checkpoint's parent is the one it was computed from; a fork (update_state or
invoke on an old checkpoint) gives a parent two children. Linear runs stay in one
column, each extra child opens a branch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["TreeRow", "render_tree"]


@dataclass(frozen=True)
class TreeRow:
    """One checkpoint: its id, its parent's id (``None`` for the first) and a label."""

    id: str
    parent: str | None
    label: str


def render_tree(rows: Iterable[TreeRow], head: str | None = None) -> list[str]:
    """Lines of text drawing ``rows`` as a tree, oldest first; ``head`` is marked."""
    rows = sorted(rows, key=lambda r: r.id)
    by_id = {r.id: r for r in rows}
    children: dict[str | None, list[TreeRow]] = {}
    for row in rows:
        parent = row.parent if row.parent in by_id else None
        children.setdefault(parent, []).append(row)
    lines: list[str] = []

    def mark(row: TreeRow) -> str:
        return "  <- latest" if row.id == head else ""

    def walk(row: TreeRow, prefix: str) -> None:
        # follow the chain while it does not branch
        while True:
            lines.append(f"{prefix}* {row.id[-12:]}  {row.label}{mark(row)}")
            kids = children.get(row.id, [])
            if len(kids) != 1:
                break
            row = kids[0]
        for i, kid in enumerate(kids):
            last = i == len(kids) - 1
            lines.append(f"{prefix}{'`' if last else '|'}-- branch {i + 1}/{len(kids)}")
            walk(kid, prefix + ("    " if last else "|   "))

    for root in children.get(None, []):
        walk(root, "")
    return lines

"""``langgraph.checkpoint.base.id``'s name: ``uuid6``, the time-ordered ids
checkpoint ids are (custom savers import it from here)."""

from __future__ import annotations

from threadloom.checkpoint.ids import uuid6

__all__ = ["uuid6"]

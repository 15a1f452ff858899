"""LangGraph's ``serde.types`` channel-name constants, re-exported for ported code."""

from __future__ import annotations

from threadloom.constants import ERROR, INTERRUPT, RESUME, SCHEDULED, TASKS

__all__ = ["ERROR", "INTERRUPT", "RESUME", "SCHEDULED", "TASKS"]

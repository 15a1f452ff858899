"""Short wire names for well-known classes: a small integer instead of a dotted path.

An object is stored as ``[name, state]``. For the classes below the name is
written as its number (one msgpack byte) instead of the string (42 bytes for
``langchain_core.messages.human.HumanMessage``); every message in a
conversation is stored at least twice, so this adds up.

An alias only abbreviates a stored *name*: reading number 1 looks up the name
``"langchain_core.messages.human.HumanMessage"`` in the registry and the
serializer's allowlist exactly as if the string had been stored. It grants no
trust and imports nothing.

APPEND-ONLY. Stored data refers to these numbers forever:

- never change, reuse, renumber or remove an entry (old rows would revive as the
  wrong class or not at all);
- add new classes at the end with the next number;
- an entry must be the name the class is registered under (its registry name).

Readers that predate an entry cannot read rows using it, so add entries only in
a release that may write data older versions need not read.
"""

from __future__ import annotations

__all__ = ["ALIASES", "WIRE_NAMES", "name_of_alias"]

ALIASES: dict[int, str] = {
    1: "langchain_core.messages.human.HumanMessage",
    2: "langchain_core.messages.ai.AIMessage",
    3: "langchain_core.messages.tool.ToolMessage",
    4: "langchain_core.messages.system.SystemMessage",
    5: "langchain_core.messages.ai.AIMessageChunk",
    6: "langchain_core.messages.human.HumanMessageChunk",
    7: "langchain_core.messages.tool.ToolMessageChunk",
    8: "langchain_core.messages.system.SystemMessageChunk",
    9: "langchain_core.messages.chat.ChatMessage",
    10: "langchain_core.messages.chat.ChatMessageChunk",
    11: "langchain_core.messages.function.FunctionMessage",
    12: "langchain_core.messages.function.FunctionMessageChunk",
    13: "langchain_core.messages.modifier.RemoveMessage",
    14: "langchain_core.documents.base.Document",
    15: "threadloom.Send",
    16: "threadloom.Interrupt",
    17: "threadloom.Command",
    18: "threadloom.Overwrite",
    19: "threadloom.RemoveMessage",
}
"""number -> registry name. Append only (see the module docstring)."""

WIRE_NAMES: dict[str, int] = {name: number for number, name in ALIASES.items()}
"""registry name -> the number written in its place."""


def name_of_alias(number: int) -> str | None:
    """The registry name stored as ``number``, or None for a number this version does not know."""
    return ALIASES.get(number)

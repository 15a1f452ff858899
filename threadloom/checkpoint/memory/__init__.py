"""In-memory saver: the shared storage core over Python dicts.

Values are serialized on ``put`` (like LangGraph's InMemorySaver), so what a
thread stored cannot change afterwards, and the same content addressing and
list deltas apply as on disk: memory grows linearly with a conversation.
"""

from threadloom.checkpoint.memory.saver import InMemorySaver, MemorySaver

__all__ = ["InMemorySaver", "MemorySaver"]

"""Node result caches (LangGraph's ``langgraph.cache``)."""

from threadloom.cache.base import BaseCache, FullKey, Namespace
from threadloom.cache.memory import InMemoryCache
from threadloom.cache.sqlite import SqliteCache

__all__ = ["BaseCache", "FullKey", "InMemoryCache", "Namespace", "SqliteCache"]

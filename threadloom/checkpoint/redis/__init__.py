"""Redis savers (redis-py, core commands + Lua only): ``RedisSaver``, ``AsyncRedisSaver``.

See docs/redis.md.
"""

from threadloom.checkpoint.redis.saver import AsyncRedisSaver, RedisSaver

__all__ = ["AsyncRedisSaver", "RedisSaver"]

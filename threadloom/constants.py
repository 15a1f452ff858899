"""Reserved channel names, config keys and separators.

They are part of the stored format (channel names in checkpoints, task paths in
the writes table), so they match LangGraph's spelling exactly: a thread written by
one can be read by the other.
"""

from __future__ import annotations

import sys
from typing import Final

# graph entry and exit
START: Final = sys.intern("__start__")
END: Final = sys.intern("__end__")

# reserved channels and write targets
INPUT: Final = sys.intern("__input__")
INTERRUPT: Final = sys.intern("__interrupt__")
RESUME: Final = sys.intern("__resume__")
ERROR: Final = sys.intern("__error__")
ERROR_SOURCE_NODE: Final = sys.intern("__error_source_node__")
NO_WRITES: Final = sys.intern("__no_writes__")
SCHEDULED: Final = sys.intern("__scheduled__")
TASKS: Final = sys.intern("__pregel_tasks")
RETURN: Final = sys.intern("__return__")
PREVIOUS: Final = sys.intern("__previous__")
COPY: Final = sys.intern("__copy__")
OVERWRITE: Final = sys.intern("__overwrite__")
SELF: Final = sys.intern("__self__")

# task kinds (first element of a task path)
PULL: Final = sys.intern("__pregel_pull")
PUSH: Final = sys.intern("__pregel_push")

# checkpoint namespaces: "parent:task_id|child:task_id"
NS_SEP: Final = sys.intern("|")
NS_END: Final = sys.intern(":")

# config["configurable"] keys users set
CONFIG_KEY_THREAD_ID: Final = sys.intern("thread_id")
CONFIG_KEY_CHECKPOINT_ID: Final = sys.intern("checkpoint_id")
CONFIG_KEY_CHECKPOINT_NS: Final = sys.intern("checkpoint_ns")
CONFIG_KEY_CHECKPOINT_MAP: Final = sys.intern("checkpoint_map")
CONFIG_KEY_RUNTIME: Final = sys.intern("__pregel_runtime")
"""Where a node's config carries its ``Runtime`` (LangGraph's key, read by its
runnables such as the prebuilt ``ToolNode``)."""

# tag of internal tasks (a StateGraph's input node) that streams do not report
TAG_HIDDEN: Final = sys.intern("langsmith:hidden")

# tag that keeps a model's tokens out of stream_mode="messages"
TAG_NOSTREAM: Final = sys.intern("nostream")

# the config key holding the keys above
CONF: Final = sys.intern("configurable")

# task id used for writes that belong to no task (input, Command, resume)
NULL_TASK_ID: Final = "00000000-0000-0000-0000-000000000000"

# writes to these channels replace earlier ones instead of being ignored
SPECIAL_CHANNELS: Final = frozenset({ERROR, INTERRUPT, RESUME, SCHEDULED})

RESERVED: Final = frozenset(
    {
        START,
        END,
        INPUT,
        INTERRUPT,
        RESUME,
        ERROR,
        ERROR_SOURCE_NODE,
        NO_WRITES,
        SCHEDULED,
        TASKS,
        RETURN,
        PREVIOUS,
        COPY,
        CONFIG_KEY_THREAD_ID,
        CONFIG_KEY_CHECKPOINT_ID,
        CONFIG_KEY_CHECKPOINT_NS,
        CONFIG_KEY_CHECKPOINT_MAP,
    }
)

__all__ = [name for name in dir() if name.isupper()]

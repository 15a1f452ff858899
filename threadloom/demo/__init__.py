"""The ``threadloom demo`` script: a scripted support agent on SQLite, no network, no LLM key."""

from threadloom.demo.agent import build_graph
from threadloom.demo.run import main as run_demo

__all__ = ["build_graph", "run_demo"]

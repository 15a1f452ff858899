"""threadloom: durable Pregel graphs with checkpoints you can inspect, replay and branch."""

__version__ = "0.1.0"

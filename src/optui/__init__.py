"""optui: a terminal UI for live LLM-inference optimization sessions."""

__version__ = "0.1.0"

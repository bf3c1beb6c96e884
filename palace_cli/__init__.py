"""palace: a memory palace in plain Markdown and git."""

__version__ = "0.1.0"

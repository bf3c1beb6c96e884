"""Capture as it happens: the Claude Code hook and its settings install."""

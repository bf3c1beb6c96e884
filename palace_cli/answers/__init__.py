"""Answering from the palace: ask, abstention, extractive answers, verify-token checks."""

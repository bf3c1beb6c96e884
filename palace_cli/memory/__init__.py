"""Memories formed from conversations: distill (extract, scorer, patterns, llmstage) and consolidate."""

"""Patch intake: parse, check, apply to an engine tree, classify touched files."""

"""Graders for repo tasks: v1 (naive, in the agent workspace) and v2 (hardened)."""

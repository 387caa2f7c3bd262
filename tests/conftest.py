"""Shared pytest configuration. Subsystem fixtures live in each tests/<subsystem>/conftest.py."""

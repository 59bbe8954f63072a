"""Shared test helpers (real processes and servers on loopback)."""

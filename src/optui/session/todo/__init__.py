"""The todo list in the session: edits (service), runs of items' experiments (runs), and agents' lists
imported and followed (sync)."""

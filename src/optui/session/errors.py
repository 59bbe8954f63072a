"""The session's error type (shared by its services)."""


class SessionError(Exception):
    """An intent that cannot be carried out (read-only, unknown name, busy...); the
    message is meant for the operator."""

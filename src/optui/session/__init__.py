"""The headless orchestrator (no Textual): see :class:`optui.session.session.Session`.

Imported lazily (``optui.session.Session``): the UI shows its first frame before the
session's heavy dependencies (pydantic, httpx, asyncssh, sqlite) are loaded.
"""

from optui.session.errors import SessionError

__all__ = ["Session", "SessionError"]


def __getattr__(name: str):
    if name == "Session":
        from optui.session.session import Session

        return Session
    raise AttributeError(name)

"""The headless orchestrator (no Textual): see :class:`optui.session.session.Session`."""

from optui.session.session import Session, SessionError

__all__ = ["Session", "SessionError"]

"""The headless orchestrator (no Textual): see :class:`optui.session.session.Session`."""

from optui.session.errors import SessionError
from optui.session.session import Session

__all__ = ["Session", "SessionError"]

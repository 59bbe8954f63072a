"""The session's event stream as typed Textual messages.

The render loop (:meth:`optui.ui.app.OptuiApp._render_loop`) takes what happened since its
last frame (:meth:`optui.ui.client.SessionClient.new_events`: each event once, in order)
and posts one message per event to the app, whose ``@on`` handlers say it: an alert as a
toast (and the bell), a finished todo run, a followed list that fails. A restart's end
(``RestartFinished``) has no message: the restart sequence that awaited it reports it
(:meth:`optui.ui.intents.servers.ServerActions.report_restart`). Light on purpose (Textual's
``Message`` only): the app's handlers are typed with these classes from its first frame.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from optui.session.state import AlertRaised as AlertValue
    from optui.session.state import FollowFailed as FollowValue
    from optui.session.state import SessionEvent
    from optui.session.state import TodoRunFinished as TodoRunValue


class AlertRaised(Message):
    """An alert of the session (``event.alert``: kind, target, message, severity)."""

    def __init__(self, event: AlertValue) -> None:
        super().__init__()
        self.alert = event.alert


class TodoRunFinished(Message):
    """A todo run ended (``outcome``: status, summary, crash class, rollback offer)."""

    def __init__(self, event: TodoRunValue) -> None:
        super().__init__()
        self.outcome = event.outcome


class FollowFailed(Message):
    """Reading the followed agent list ``key`` failed with ``error``."""

    def __init__(self, event: FollowValue) -> None:
        super().__init__()
        self.key = event.key
        self.error = event.error


def message_for(event: SessionEvent) -> Message | None:
    """The Textual message that says ``event`` (one of :mod:`optui.session.state`'s events);
    None for a ``RestartFinished``: a restart this window asked for is reported by the sequence
    that awaited it (``ServerActions.report_restart``), any other one's crash was an alert."""
    # the frozen values, loaded with the session (after the first frame)
    from optui.session.state import AlertRaised as Alert
    from optui.session.state import FollowFailed as Follow
    from optui.session.state import TodoRunFinished as TodoRun

    match event:
        case Alert():
            return AlertRaised(event)
        case TodoRun():
            return TodoRunFinished(event)
        case Follow():
            return FollowFailed(event)
    return None

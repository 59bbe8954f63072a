"""The session's event stream as typed Textual messages.

The render loop (:meth:`optui.ui.app.OptuiApp._render_loop`) takes what happened since its
last frame (:meth:`optui.ui.client.SessionClient.new_events`: each event once, in order)
and posts one message per event to the app, whose ``@on`` handlers say it: an alert as a
toast (and the bell), a finished todo run, a followed list that fails, a restart nobody in
this window waits for. Light on purpose (Textual's ``Message`` only): the app's handlers are
typed with these classes from its first frame.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from optui.session.state import AlertRaised as AlertValue
    from optui.session.state import FollowFailed as FollowValue
    from optui.session.state import RestartFinished as RestartValue
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


class RestartFinished(Message):
    """A restart of the session ended (``result``); ``awaited``: its caller reports it."""

    def __init__(self, event: RestartValue) -> None:
        super().__init__()
        self.result = event.result
        self.awaited = event.awaited


def message_for(event: SessionEvent) -> Message:
    """The Textual message that says ``event`` (one of :mod:`optui.session.state`'s events)."""
    # the frozen values, loaded with the session (after the first frame)
    from optui.session.state import AlertRaised as Alert
    from optui.session.state import FollowFailed as Follow
    from optui.session.state import RestartFinished as Restart
    from optui.session.state import TodoRunFinished as TodoRun

    match event:
        case Alert():
            return AlertRaised(event)
        case TodoRun():
            return TodoRunFinished(event)
        case Follow():
            return FollowFailed(event)
        case Restart():
            return RestartFinished(event)
    raise TypeError(f"not a session event: {event!r}")

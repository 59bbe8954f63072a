"""What every action handler of :class:`~optui.ui.app.OptuiApp` is given: the app's
services (notifications, screens, workers), the session client, the selected server.

The handlers know the app as a Textual ``App`` plus :class:`ActionHost` (what OptuiApp adds
that they use), not ``OptuiApp`` itself: the app imports the handlers, so importing it back,
even for types, would make the two one import cycle (tests/unit/test_import_cycles.py)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:
    from textual.app import App

    from optui.ui.client import SessionClient


class ActionHost(Protocol):
    """What the handlers use of :class:`~optui.ui.app.OptuiApp` beyond Textual's ``App``."""

    #: the session's client (set once the campaign is loaded: the policy refuses actions before)
    client: SessionClient
    #: the campaign directory's name (titles of exports)
    campaign: str
    def paint_now(self) -> None:
        """Paint the session's current snapshot now."""


class Actions:
    """One domain's actions (servers, benchmarks, todo, journal, hosts), carried out for
    ``app`` (composition: the app holds one of each; none is a base class of the app)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.host = cast("ActionHost", app)  # OptuiApp is one (see module doc)

    @property
    def client(self) -> SessionClient:
        """The session's client (snapshot, slow calls off the event loop)."""
        return self.host.client

    # the app's services the actions use, by their Textual names
    def notify(self, message: str, **options) -> None:
        self.app.notify(message, **options)

    def push_screen(self, screen, callback=None) -> None:
        self.app.push_screen(screen, callback)

    def push_screen_now(self, screen) -> asyncio.Future[Any]:
        """Show ``screen`` now (keys typed right after the one that opened it reach it) and
        return what it is dismissed with, to await in a worker (as ``push_screen_wait``, which
        shows it only once the worker runs)."""
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def dismissed(result: Any) -> None:
            if not done.done():
                done.set_result(result)

        self.app.push_screen(screen, dismissed)
        return done

    def run_worker(self, work, **options):
        return self.app.run_worker(work, **options)

    def query_one(self, selector, expect_type=None):
        return self.app.query_one(selector, expect_type) if expect_type else self.app.query_one(selector)

    def selected_server(self) -> str | None:
        """The server under the servers panel's cursor (else the first configured one)."""
        from optui.ui.widgets.server_panel import ServerPanel

        key = self.app.query_one("#servers", ServerPanel).current_key
        if key is None:
            return next(iter(self.client.server_names()), None)
        return str(key)

    def fail(self, exc: Exception) -> None:
        """Show ``exc`` as an error notification (never a crash)."""
        self.app.notify(str(exc), severity="error", timeout=8)

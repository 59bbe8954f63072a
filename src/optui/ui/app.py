"""The Textual app: lays out the five panels, renders session snapshots, sends intents.

Data flows one way: the session publishes snapshots (frozen values) → the client
(:mod:`optui.ui.client`) → :meth:`OptuiApp._render_loop` (coalesced, ≤ 10 repaints/s) pushes
them into the panels. Keys and the panels' typed messages (``TodoPanel.Add``...) go to one
action handler per domain (:mod:`optui.ui.intents`), composed into the app. The app owns no
domain logic.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events, on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Static

from optui.core.text.safe_text import headline, safe_line
from optui.ui.client import SessionClient
from optui.ui.colors import OPTUI_VARIABLES, focus_now
from optui.ui.commands import PaletteScreen, palette_commands
from optui.ui.first_frame import PANEL_TITLES, FirstFrame
from optui.ui.intents import BenchActions, HostActions, JournalActions, ServerActions, TodoActions
from optui.ui.intents.journal import JournalQueried
from optui.ui.intents.todo import todo_commands
from optui.ui.key_order import KeyBarrier, KeySequencer
from optui.ui.key_table import TEXTUAL_KEY_COMMANDS, key_hints, palette_key_commands
from optui.ui.main_screen import MainScreen
from optui.ui.policy import allowed
from optui.ui.process_setup import exit_on_signals, freeze_long_lived_objects, resume_collector
from optui.ui.safe_screen import UnsafeCharFilter
from optui.ui.session_messages import AlertRaised, FollowFailed, TodoRunFinished, message_for
from optui.ui.textual_patches import driver_class, first_frame_shown
from optui.ui.textual_patches.theme_select import select_theme_before_mount
from optui.ui.themes import DEFAULT_THEME, load_themes, shipped_themes
from optui.ui.toast_gate import ShownMessage, ToastGate
from optui.ui.widgets.key_bar import KeyBar

if TYPE_CHECKING:  # the session (pydantic, httpx, sqlite...) is imported after the first frame
    from optui.session import Session
    from optui.session.state import SearchProgress, SessionState

class PanelBox(Vertical):
    """A bordered panel (GPUs, Servers...): the unit that ``z`` zooms to full screen."""

    ALLOW_MAXIMIZE = True


PANELS = {"gpus": "#gpus-box", "servers": "#servers-box", "todo": "#todo-box", "bench": "#bench-box", "journal": "#journal-box"}
_FOCUS_TARGET = {"gpus": "#gpus", "servers": "#servers", "todo": "#todo-list", "bench": "#bench", "journal": "#journal"}
MIN_FRAME_S = 0.1
#: how often the TUI looks for a flag search another optui process runs on its campaign (s)
SEARCH_ELSEWHERE_S = 2.0
#: rows a side pane keeps for the rest when GPUs would take more (optui.tcss's -narrow rules):
#: status line and key bar 2, GPUs' border 2, Servers 5, Todo 4, Bench 7 (status, results, log),
#: Journal 5 (-tall); -short hides Todo and Journal
SIDE_PANE_ROWS_BESIDE_GPUS = {"-tall": 25, "-short": 16}


#: a toast's most lines, its title included: a text of several lines (a traceback, a todo
#: run's summary) shows its headline in TOAST_LINES, a one-line text (a refusal and its cause,
#: a config error at its file:line, the path of a report just written) may take
#: ONE_LINE_TOAST_LINES (a side pane's 60 columns: ~180 characters, a real path whole)
TOAST_LINES = 3
ONE_LINE_TOAST_LINES = 5
#: a toast's width in columns (Textual's Toast: 60, at most 50 %; a wide screen's 80 and a
#: side pane's the whole pane: optui.tcss)
TOAST_WIDTH = 60
WIDE_TOAST_WIDTH = 80
WIDE_WIDTH = 120
#: what a cut toast ends with: the whole text is in the message log (``m``)
TOAST_MORE = " … m: whole message"
#: the toasts the message log keeps, newest last
MESSAGES_KEPT = 200
#: below this width (the -narrow breakpoint) a toast takes the whole width (optui.tcss)
NARROW_WIDTH = 80
#: the most toasts on screen at once, a side pane's and a wider screen's: the last one of
#: them says that more came (:class:`~optui.ui.toast_gate.ToastGate`)
MAX_TOASTS_NARROW = 3
MAX_TOASTS = 5


def toast_text(message: str, width: int, lines: int) -> str:
    """``message`` as a toast of at most ``lines`` lines of ``width`` columns: its headline
    (:func:`~optui.core.text.safe_text.headline`: the first line, a traceback's exception line),
    cut with :data:`TOAST_MORE` when more follows (room kept for word wrapping)."""
    limit = max(20, lines * width - width // 3 - len(TOAST_MORE))  # a word wrapped loses up to a word a line
    line = headline(message, limit=limit)
    return line[:-2].rstrip() + TOAST_MORE if line.endswith(" …") else line


def messages_text(messages: Iterable[ShownMessage]) -> str:
    """The message log's body: each message's time, severity and title, then its whole text
    indented, newest first (plain text: the details screen shows it escaped)."""
    blocks = []
    for m in reversed(list(messages)):
        head = f"{time.strftime('%H:%M:%S', time.localtime(m.ts))} {m.severity}" + (f" — {m.title}" if m.title else "")
        body = "\n".join(f"  {line}" for line in m.text.strip().splitlines() or [""])
        blocks.append(f"{head}\n{body}")
    return "\n\n".join(blocks) if blocks else "No messages yet."


class OptuiApp(App):
    """optui's TUI over one :class:`~optui.session.Session`.

    Give the session directly, or a ``loader`` (called in a worker thread after the first
    frame; it imports the heavy parts, validates the config and builds the session) so the
    screen appears at once. A loader error (``ConfigError``, ``JournalError``) ends the app
    with ``startup_error`` set and exit code 2.
    """

    #: the dashboard's stylesheet, read on Textual's Ready (:meth:`_read_dashboard_css`): the first
    #: frame (the status line, the panels' outline, the key bar) needs only :attr:`CSS`
    DASHBOARD_CSS = Path(__file__).with_name("optui.tcss")
    CSS = "#status-line { height: 1; padding: 0 1; background: $boost; color: $text-muted; }"
    TITLE = "optui"
    #: a zoomed panel (z) keeps the key bar under it: its keys, and how to leave the zoom
    ALLOW_IN_MAXIMIZED_VIEW = "KeyBar"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW_WIDTH, "-medium"), (WIDE_WIDTH, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]
    BINDINGS = [
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding("question_mark,f1", "help", "Help", id="app.help"),
        Binding("escape", "close_help", "Close help", show=False, id="app.close_help"),
        Binding("1", "focus_panel('gpus')", "GPUs", show=False, id="app.focus_gpus"),
        Binding("2", "focus_panel('servers')", "Servers", show=False, id="app.focus_servers"),
        Binding("3", "focus_panel('todo')", "Todo", show=False, id="app.focus_todo"),
        Binding("4", "focus_panel('bench')", "Bench", show=False, id="app.focus_bench"),
        Binding("5", "focus_panel('journal')", "Journal", show=False, id="app.focus_journal"),
        Binding("z", "zoom", "Zoom", id="app.zoom"),
        Binding("r", "restart", "Restart", id="server.restart"),
        Binding("ctrl+r", "rollback", "Roll back", show=False, id="server.rollback"),
        Binding("l", "server_log", "Log", show=False, id="server.log"),
        Binding("b", "bench", "Bench", id="bench.run"),
        Binding("A", "abort_bench", "Abort bench", show=False, id="bench.abort"),
        Binding("S", "stop_experiments", "Stop experiments", show=False, id="todo.stop_experiments"),
        Binding("n", "note", "Note", show=False, id="journal.note"),
        Binding("E", "experiments", "Experiments", show=False, id="journal.experiments"),
        Binding("v", "results_view", "Results", show=False, id="bench.results_view"),  # from any panel, as E
        Binding("p", "pause", "Pause", show=False, id="app.pause"),
        Binding("at", "command_log", "Command log", show=False, id="app.command_log"),
        Binding("m", "messages", "Messages", show=False, id="app.messages"),
        Binding("ctrl+l", "refresh", "Refresh", show=False, id="app.refresh"),
    ]

    def __init__(self, session: Session | None = None, *, loader: Callable[[], Session] | None = None,
                 theme_name: str | None = None, keymap: dict[str, str] | None = None, title: str | None = None,
                 log_max_lines: int = 10_000, freeze_gc: bool = False) -> None:
        super().__init__()
        # the CLI's own process (it sets it): the collector, paused for the start-up, runs again
        # from the first frame, and what exists once the campaign shows is frozen (process_setup)
        self._freeze_gc = freeze_gc
        if (session is None) == (loader is None):
            raise ValueError("give a session or a loader")
        # the session is built (by the loader) and handed to the client here, nowhere else: every
        # other line of the UI goes through self.client (tests/unit/test_ui_boundary.py); this attribute
        # stays for the tests, which set up state through it
        self.session: Session | None = session
        self.client: SessionClient | None = SessionClient(session) if session is not None else None
        self._loader = loader
        #: every toast's whole text, newest last (the message log, ``m``)
        self.messages: deque[ShownMessage] = deque(maxlen=MESSAGES_KEPT)
        self._toast_gate = ToastGate()  # which toasts are drawn (at most a few; none over a dialog that asks)
        self.startup_error: str | None = None
        config = session.config if session is not None else None
        self._theme_name = theme_name or (config.theme if config else None) or DEFAULT_THEME
        self._user_keymap = dict(config.keymap if config else {}, **(keymap or {}))
        self._log_max_lines = config.log_max_lines if config else log_max_lines
        self._seen_version = -1
        self.panels_mounted = False  # True once the panels replaced the first frame's placeholders
        self._key_order = KeySequencer(self, lambda: self.panels_mounted and self.client is not None)
        self._key_bar_for: tuple | None = None  # (focus, screen, read-only, bench running) the key bar was drawn for
        self._status_plain = ""
        self._bell = bool(config.bell) if config else False
        self._session_closed = False
        self._dashboard_behind = False  # a frame left the panels under an opaque screen unpainted
        self.campaign = "loading…"  # the campaign directory's name, once loaded
        # what the keys, the panels' messages and the palette ask for: one handler per domain
        self.server_actions = ServerActions(self)
        self.bench_actions = BenchActions(self)
        self.todo_actions = TodoActions(self)
        self.journal_actions = JournalActions(self)
        self.host_actions = HostActions(self)
        from optui.ui.intents.agent_requests import AgentRequestActions

        self.agent_request_actions = AgentRequestActions(self)  # optui mcp's requests
        from optui.ui.intents.fleet import FleetActions

        self.fleet_actions = FleetActions(self)  # [fleet]: the grid's host details and filter
        self._key_pressed = asyncio.Event()  # a key ends the render loop's pause between frames
        #: the flag search another optui process runs here (a SearchProgress; None: none)
        self.search_elsewhere: SearchProgress | None = None
        self._search_looked_at = 0.0  # monotonic s of the last look for it
        self._search_looking = False
        if title:
            self.sub_title = title
        self._theme_errors = self._apply_theme()
        self._unsafe_filter = UnsafeCharFilter()  # one instance: Textual caches filtered lines per filter

    # ---------------------------------------------------------- setup
    def get_line_filters(self):
        """Textual's filters, then :class:`~optui.ui.safe_screen.UnsafeCharFilter`: no control
        character of any text on screen reaches the terminal."""
        return [*super().get_line_filters(), self._unsafe_filter]

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = False, brief: bool = False) -> None:
        """Textual's toast, its text escaped visibly (alerts quote servers' and agents' text)
        and without markup by default (a ``[/x]`` in such text raised ``MarkupError``). A text
        of several lines, or ``brief`` (a todo run's summary), is at most :data:`TOAST_LINES`
        lines with its title, a one-line text at most :data:`ONE_LINE_TOAST_LINES`
        (:func:`toast_text`: a traceback's and a todo run's toasts covered two panels, a long
        one-line refusal half a side pane): a traceback shows its exception line, a longer
        text is cut with :data:`TOAST_MORE`. The whole text of every toast is kept for the
        message log (``m``). At most :data:`MAX_TOASTS` toasts show at once
        (:data:`MAX_TOASTS_NARROW` in a side pane), the last one saying that more came and
        where they are (a more severe one that comes later says so again). While a dialog asks
        a question (a screen with ``HOLDS_TOASTS``: a toast covered the rollback offer's
        buttons at 50x30) toasts are held, those on screen as it opens too, and one says, once
        it closes, that they came."""
        shown = ShownMessage(time.time(), str(severity), str(title), str(message))
        self.messages.append(shown)
        if not self.screen_stack:  # the app is closing (a session event's message came after its screens)
            return
        if timeout is None:
            timeout = self.NOTIFICATION_TIMEOUT
        w = self.size.width
        admitted = self._toast_gate.admit(shown, timeout, most=MAX_TOASTS_NARROW if w < NARROW_WIDTH else MAX_TOASTS,
                                          holding=getattr(self.screen, "HOLDS_TOASTS", False))
        if admitted is None:
            return
        title, text = admitted
        # the Toast's width (optui.tcss): a side pane's whole width but the rack's scroll bar (2),
        # else 60 (80 on a wide screen) and at most half; its border and padding take 3
        width = (w - 2 if w < NARROW_WIDTH else min(WIDE_TOAST_WIDTH if w >= WIDE_WIDTH else TOAST_WIDTH, w // 2)) - 3
        lines = TOAST_LINES if brief or "\n" in text.strip() else ONE_LINE_TOAST_LINES
        text = toast_text(text, max(20, width), lines - (1 if title else 0))
        super().notify(text, title=safe_line(str(title)), severity=severity, timeout=timeout, markup=markup)

    def clear_notifications(self) -> None:
        """Every toast goes (Textual's), and the count of those on screen with them."""
        self._toast_gate.clear()
        super().clear_notifications()

    def get_driver_class(self):
        """Textual's driver, or on Linux/macOS terminals with Textual's patches on
        :class:`~optui.ui.textual_patches.quiet_driver.QuietLinuxDriver` (no input polling
        while idle). ``TEXTUAL_DRIVER`` still picks another one."""
        return driver_class(super().get_driver_class())

    def get_default_screen(self) -> MainScreen:
        return MainScreen.for_app(self)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(OPTUI_VARIABLES)

    def compose(self) -> ComposeResult:
        """The first frame: the status line, the panels' outline drawn by one widget
        (:class:`~optui.ui.first_frame.FirstFrame`) and the key bar. The panels' boxes and
        the panels (and the DataTable, Log and core modules they import) mount in the
        outline's place right after it, in :meth:`_mount_panels`; the campaign loads after that."""
        yield Static("optui  loading campaign…", id="status-line", markup=False)
        yield FirstFrame()
        yield KeyBar(id="keys")

    def _read_dashboard_css(self) -> None:
        """Add optui.tcss to the stylesheet (after the first frame: ~3 ms less before it on the
        2-core VM, bench/RESULTS.md) and restyle what is mounted (the first frame's widgets,
        a toast); the panels mounted next are styled with it."""
        self.stylesheet.read(self.DASHBOARD_CSS)
        self.stylesheet.parse()
        self.stylesheet.update(self)

    async def _mount_panels(self) -> None:
        """Replace the first frame's outline by the panels' boxes and the panels (see
        :meth:`compose`), in one frame."""
        from optui.ui.widgets.bench_panel import BenchPanel
        from optui.ui.widgets.gpu_panel import GpuPanel
        from optui.ui.widgets.journal_panel import JournalPanel
        from optui.ui.widgets.server_panel import ServerPanel
        from optui.ui.widgets.todo_panel import TodoPanel

        panels = {"gpus": GpuPanel(id="gpus"), "servers": ServerPanel(id="servers"), "todo": TodoPanel(id="todo"),
                  "bench": BenchPanel(id="bench", max_lines=self._log_max_lines), "journal": JournalPanel(id="journal")}
        boxes = {}
        for name, panel in panels.items():
            box = boxes[name] = PanelBox(panel, id=f"{name}-box", classes="panel")
            box.border_title = PANEL_TITLES[name]
        first_frame = self.query_one(FirstFrame)
        with self.batch_update():
            await self.screen.mount(Horizontal(boxes["gpus"], boxes["servers"], id="top"),
                                    Horizontal(boxes["todo"], boxes["bench"], id="middle"),
                                    boxes["journal"], before=first_frame)
            await first_frame.remove()
        self.panels_mounted = True
        self._fit_side_pane()
        self.watch(self.query_one(PANELS["gpus"]).screen, "maximized", self._zoom_changed, init=False)
        if self.focused is None:
            focus_now(self.query_one("#servers"))

    def on_resize(self, event: events.Resize) -> None:
        if self.panels_mounted:  # (runs before App's own handler: self.size is still the old size)
            self._fit_side_pane(event.size)

    def _zoom_changed(self, zoomed: Widget | None) -> None:
        """The zoomed GPU panel lists each GPU's processes (PID, server, memory); the zoomed
        Servers panel gives each server the lines it needs (command, flags, load)."""
        from optui.ui.widgets.gpu_panel import GpuPanel
        from optui.ui.widgets.server_panel import ServerPanel

        self.query_one("#gpus", GpuPanel).set_show_processes(zoomed is not None and zoomed.id == "gpus-box")
        self.query_one("#servers", ServerPanel).set_zoomed(zoomed is not None and zoomed.id == "servers-box")
        self.query_one(KeyBar).update_keys()  # the zoom key now says how to go back

    def _fit_side_pane(self, size: Size | None = None) -> None:
        """In a side pane (< 80 columns) the GPU panel's expanded hosts get only the rows
        the other panels leave (:data:`SIDE_PANE_ROWS_BESIDE_GPUS`): more GPU lines than
        that and hosts show one line each, so Todo and Bench keep their room. ``size``: the
        terminal's (default: the app's now)."""
        from optui.ui.widgets.gpu_panel import GpuPanel

        width, height = size or self.size
        beside = SIDE_PANE_ROWS_BESIDE_GPUS["-short" if height < 30 else "-tall"]
        self.query_one("#gpus", GpuPanel).set_max_rows(max(2, height - beside) if width < 80 else None)

    def _apply_theme(self) -> list[str]:
        """Register the theme files and select the configured theme before the first frame;
        problems to report. Of the shipped files only the configured theme's is read before
        it; the others are registered after it (:meth:`_register_other_themes`)."""
        themes, errors = load_themes(wanted=self._theme_name or DEFAULT_THEME)
        for theme in themes:
            self.register_theme(theme)
        name = self._theme_name if self._theme_name in self.available_themes else DEFAULT_THEME
        if name != self._theme_name:
            errors.append(f"unknown theme {self._theme_name!r}; using {DEFAULT_THEME}")
        select_theme_before_mount(self, name)  # no CSS refresh queued: nothing is styled yet
        return errors

    async def _register_other_themes(self) -> None:
        """The shipped themes the first frame did not need, for the palette's theme list (read
        off the loop; those registered already are kept: the one on screen, a user's file of
        a shipped theme's name)."""
        for theme in await asyncio.to_thread(shipped_themes):
            if theme.name not in self.available_themes:
                self.register_theme(theme)

    def on_mount(self) -> None:
        for error in self._theme_errors:  # a toast is one line: one each
            self.notify(error, title="themes", severity="warning", timeout=10)
        if self._user_keymap:
            self.set_keymap(self._user_keymap)
        exit_on_signals(self.exit)  # tmux pane killed, terminal closed: quit like q
        self.screen_change_signal.subscribe(self, self._screen_changed)

    def on_descendant_focus(self) -> None:
        self.call_after_refresh(self._update_key_bar)

    def _update_key_bar(self) -> None:
        with contextlib.suppress(Exception):
            self.query_one(KeyBar).update_keys()

    async def on_ready(self) -> None:
        """The first frame is on screen: mount the panels, then load the campaign (heavy
        imports, config validation, journal) and start the session in a worker. Keys typed
        meanwhile are held until the campaign is loaded (ui/key_order.py)."""
        first_frame_shown(self)  # written (and flushed) by the event loop: its driver's writer thread from now on
        if self._freeze_gc:  # the CLI paused the collector for the start-up (process_setup)
            resume_collector()
        self._read_dashboard_css()
        self.run_worker(self._register_other_themes(), group="themes", exit_on_error=False)
        await self._mount_panels()
        self.run_worker(self._start_session(), name="session", group="session", exit_on_error=False)

    async def _start_session(self) -> None:
        if self.session is None:
            loader = self._loader
            if loader is None:
                raise RuntimeError("OptuiApp needs a session or a loader")
            try:
                self.session = await asyncio.to_thread(loader)
            except Exception as exc:  # ConfigError / JournalError: a message for the operator
                self.startup_error = str(exc)
                self.exit(return_code=2)
                return
        client = self.client = SessionClient(self.session)
        from optui.ui.widgets.server_panel import ServerPanel
        from optui.ui.widgets.todo_panel import TodoPanel

        self.query_one("#servers", ServerPanel).campaign_loaded()  # they said "loading the campaign…" until now
        self.query_one("#todo", TodoPanel).campaign_loaded()
        path = client.config_path
        self.campaign = path.resolve().parent.name if path else "(no optui.toml)"
        config = client.config
        if config.keymap:
            self.set_keymap(dict(config.keymap, **self._user_keymap))
        from optui.ui.widgets.gpu_panel import GpuPanel

        self.query_one("#gpus", GpuPanel).mem_alert_pct = config.mem_alert_pct
        if config.fleet is not None:  # the fleet's grid under the configured hosts' GPUs
            from optui.ui.widgets.fleet_grid import FleetGrid

            await self.query_one(PANELS["gpus"]).mount(FleetGrid(id="fleet"))
            self.query_one("#gpus", GpuPanel).fleet_keys = True
        self._bell = bool(config.bell)
        self.refresh_bindings()
        await client.start()
        await self._render_loop(client)

    def _look_for_search_elsewhere(self, state: SessionState) -> None:
        """At most every :data:`SEARCH_ELSEWHERE_S`, while the journal's recent events hold a
        flag search's (or one was seen): read the search another optui process runs here
        (``optui search run`` beside the TUI), for the todo panel's line and ``S``. An idle
        dashboard with no search reads nothing (no wake-up of the journal thread)."""
        if self.search_elsewhere is None and not any(e.type.startswith("search.") for e in state.events):
            return
        now = time.monotonic()
        if self._search_looking or now - self._search_looked_at < SEARCH_ELSEWHERE_S:
            return
        self._search_looked_at, self._search_looking = now, True
        self.run_worker(self._read_search_elsewhere(), group="search-elsewhere", exit_on_error=False)

    async def _read_search_elsewhere(self) -> None:
        client = self.client
        try:
            self.search_elsewhere = await client.search_elsewhere() if client is not None else None
        except Exception:  # a journal that cannot be read now: the next look may
            self.search_elsewhere = None
        finally:
            self._search_looking = False

    async def _render_loop(self, client: SessionClient) -> None:
        """Repaint from the session's snapshot whenever it changes (≤ 1/MIN_FRAME_S Hz),
        and at least once a second (uptimes, ages). What a key changed is painted at
        once, without waiting out the pause (a benchmark's stream keeps the loop busy)."""
        painted_at = 0.0
        while True:
            # 1.1 s, not 1.0: a GPU source at 1 s paints every frame; the timeout (for clocks
            # and ages) must not race it and paint twice a second
            self._seen_version = await client.wait_changed(self._seen_version, timeout=1.0 + MIN_FRAME_S)
            pause = painted_at + MIN_FRAME_S - time.monotonic()
            if pause > 0:  # a burst of changes: wait out the frame (an idle dashboard never does)
                # a key ends the pause; a cancel ends the loop (asyncio.timeout, not wait_for: 3.11's
                # wait_for drops a cancel that arrives as the wait ends, see adapters/aio.py)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(pause):
                        await self._key_pressed.wait()
            painted_at = time.monotonic()
            self._seen_version = client.version  # what changed during the pause is painted now
            self.apply_state(client.snapshot())
            for event in client.new_events():  # what happened, each once, in order: typed messages
                if (message := message_for(event)) is not None:
                    self.post_message(message)
            self._key_pressed.clear()
            if self._freeze_gc:  # the campaign is on screen: what exists now lives all day
                self._freeze_gc = False
                self.call_after_refresh(freeze_long_lived_objects)

    async def on_event(self, event: events.Event) -> None:
        if not isinstance(event, events.Key | events.Paste):
            await super().on_event(event)
            return
        # one at a time, in order (ui/key_order.py): also keys typed ahead during the first frame
        back = event.is_forwarded  # bubbled back up from the widget it was forwarded to
        if not back and not self._key_order.admit(event):
            return
        if isinstance(event, events.Key):
            self._key_pressed.set()
        await super().on_event(event)
        if back or not event.is_forwarded:  # its bindings have run, or a priority binding took it
            self._key_order.handled(event)
        else:
            self._key_order.forwarded(event)

    def on_key_barrier(self, barrier: KeyBarrier) -> None:
        self._key_order.barrier_back(barrier)

    # ---------------------------------------------------------- rendering
    def apply_state(self, state: SessionState) -> None:
        """Push one snapshot into the panels. Each panel is given the values it shows and
        skips a frame whose values equal those on screen (``==`` on frozen values)."""
        from optui.ui.widgets.bench_panel import BenchPanel
        from optui.ui.widgets.gpu_panel import GpuPanel
        from optui.ui.widgets.server_panel import ServerPanel

        # under an opaque screen (the experiments view) the dashboard is not drawn: its panels
        # wait (a streaming bench log and the journal were ~17 % of the event loop there) and
        # are painted from the snapshot of the moment it shows again (_screen_changed); the
        # bench log loses nothing (the snapshot keeps as many lines as the log shows)
        shown = self._dashboard_shown()
        self._dashboard_behind = not shown
        with self.batch_update():
            if shown:
                self.query_one("#gpus", GpuPanel).show(state.hosts, state.gpu_history, state.servers)
                if state.fleet is not None:
                    from optui.ui.widgets.fleet_grid import FleetGrid

                    for grid in self.query("#fleet").results(FleetGrid):
                        grid.show(state.fleet)
                self.query_one("#servers", ServerPanel).show(state.servers)
            self._show_todos(state)
            self.agent_request_actions.show(state)
            if shown:
                self.journal_actions.show_journal(state)
                self.query_one("#bench", BenchPanel).show(state.bench, state.bench_rows, state.bench_output,
                                                          self.bench_actions.experiments_of(state.bench_rows))
            self._apply_status_line(state)
            running = state.bench is not None and state.bench.status == "running"
            keys = (self.focused, self.screen, state.read_only, running)
            if keys != self._key_bar_for:  # the bar depends on these only (ui.policy, abort)
                self._key_bar_for = keys
                self.query_one(KeyBar).update_keys()

    def _dashboard_shown(self) -> bool:
        """The dashboard is drawn: every screen between it and the top one is see-through
        (Textual draws the screen right under the top one whatever the top's opacity)."""
        return all(screen.styles.background.a < 1 for screen in self.screen_stack[1:-1])

    def _screen_changed(self, _screen) -> None:
        if getattr(self.screen, "HOLDS_TOASTS", False):  # the toasts on screen wait too
            if self._toast_gate.dialog_opened():
                self.clear_notifications()
        elif (held := self._toast_gate.dialog_closed()) is not None:
            self.notify(held.text, title=held.title, severity=held.severity, timeout=15)
        if self._dashboard_behind and self._dashboard_shown():
            self.paint_now()

    def paint_now(self) -> None:
        """Paint the session's current snapshot now (after an action whose effect the next
        key may depend on), without waiting for the render loop's next frame."""
        if self.client is not None and self.panels_mounted:
            self.apply_state(self.client.snapshot())

    def _show_todos(self, state: SessionState) -> None:
        """The items, the experiment runner's steps and the followed lists into the todo panel."""
        from optui.ui.widgets.todo_panel import TodoPanel

        follows = []
        for _key, st in state.follows:
            mark = {"ok": "✓", "waiting": "…", "starting": "…"}.get(st.state, "✗")
            follows.append(f"{Path(st.spec.split(':', 1)[-1]).name or st.spec} {mark}")
        runs = state.todo_runs
        parts = [f"⚗ {len(runs.steps)} (S stops)"] if runs.running else []
        box_width = self.query_one("#todo-box").size.width  # the subtitle's room: less its corners, a space each side
        room = box_width - 4 if box_width > 24 else None
        if state.search is not None and state.search.status == "running":  # its trials are these runs
            parts = [state.search.line(room)]
        else:
            self._look_for_search_elsewhere(state)
            if self.search_elsewhere is not None:  # another optui process runs one on this campaign
                parts = [self.search_elsewhere.line(room and max(20, room - sum(len(p) + 5 for p in parts))), *parts]
        hint = self._silent_list_hint(state)
        if follows:
            parts.append("following " + "  ".join(follows) + ("  ⚠ silent" if hint else ""))
        self.query_one("#todo", TodoPanel).show(state.todos, dict(runs.steps), "  ·  ".join(parts), hint=hint)

    # ---------------------------------------------------------- the session's events (session_messages.py)
    @on(AlertRaised)
    def _alert_raised(self, msg: AlertRaised) -> None:
        """An alert as a notification (+ the terminal bell with ``bell = true``)."""
        alert = msg.alert
        self.notify(alert.message, title=alert.kind.replace("_", " "), severity=alert.severity, timeout=15)
        if self._bell:
            self.bell()

    @on(TodoRunFinished)
    def _todo_run_finished(self, msg: TodoRunFinished) -> None:
        self.todo_actions.run_finished(msg.outcome)

    @on(FollowFailed)
    def _follow_failed(self, msg: FollowFailed) -> None:
        self.notify(msg.error, title=f"cannot follow {msg.key}", severity="error", timeout=10)

    @staticmethod
    def _silent_list_hint(state: SessionState) -> str | None:
        """The todo panel's hint when a followed list went quiet while an agent acts through
        optui mcp (:func:`~optui.core.todo.formats.silent_list_hint`), else None."""
        from optui.core.todo.formats import silent_list_hint

        if not state.follows:
            return None
        agents = [(e.actor, e.ts) for e in state.events if e.actor.startswith("agent:")]
        return silent_list_hint([(key, st.state, st.last_sync) for key, st in state.follows], agents, time.time())

    def _apply_status_line(self, state: SessionState) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("optui ", style="bold")
        if self.sub_title:
            text.append(f"{safe_line(self.sub_title)}  ")
        text.append(f"campaign {self.campaign}", style="dim")
        if state.read_only:
            text.append("  READ-ONLY", style="bold")
        if state.paused:
            text.append("  PAUSED (p)", style="bold")
        if state.journal_error:
            text.append(f"  journal: {safe_line(state.journal_error)}", style="bold red")
        if state.config_error:
            text.append(f"  config: {safe_line(state.config_error.splitlines()[0])}", style="bold red")
        if state.fleet is not None and state.fleet.error:  # Prometheus down, slow, refusing: the rest works on
            text.append(f"  fleet: {safe_line(state.fleet.error)}", style="bold red")
        if text.plain != self._status_plain:  # unchanged: skip the layout pass
            self._status_plain = text.plain
            self.query_one("#status-line", Static).update(text)

    # ---------------------------------------------------------- actions: view
    def action_command_palette(self) -> None:
        """Textual's command palette with a key bar of its own (:class:`~optui.ui.commands.PaletteScreen`)."""
        if self.use_command_palette and not PaletteScreen.is_open(self):
            self.push_screen(PaletteScreen(id="--command-palette"))

    def get_system_commands(self, screen):
        # Textual's Keys, Maximize/Minimize and Quit are the keys' own commands here, by the
        # keys' own labels (ui/key_table.py): the palette and the help cannot disagree
        yield from (c for c in super().get_system_commands(screen) if c.title not in TEXTUAL_KEY_COMMANDS)
        yield from palette_key_commands(screen)
        if self.client is not None:
            hints = key_hints(screen)  # every entry names its key where it has one
            yield from palette_commands(self, hints)
            yield from todo_commands(self, hints)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "close_help":
            return bool(self.screen.query("KeyHelp"))
        return allowed(self, action, parameters)  # False: hidden from the footer and refused

    def action_focus_panel(self, name: str) -> None:
        """Focus panel ``name`` (the number keys; with a fleet, ``1`` focuses its grid, ``1``
        again the configured hosts' GPUs). The panel is shown whatever the layout:
        while one panel is zoomed the zoom moves to it, and a panel the layout hides or
        squeezes to its border (a short side pane) is zoomed."""
        if not self.panels_mounted:  # a key in the first frame's few ms: nothing to focus yet
            return
        box = self.query_one(PANELS[name])
        zoomed = box.screen.maximized  # the dashboard's screen (not a dialog's on top of it)
        if zoomed is not None and zoomed is not box or zoomed is None and not self._has_room(box):
            box.screen.maximize(box, container=False)
        target = self.query_one(_FOCUS_TARGET[name])
        grids = self.query("#fleet") if name == "gpus" else None
        if grids:  # fleet mode: the grid is the GPU panel's subject; 1 again: the configured hosts
            grid = grids.first()
            target = target if self.focused is grid else grid
        focus_now(target.focus_target() if hasattr(target, "focus_target") else target)

    def _has_room(self, box: Widget) -> bool:
        """``box`` shows at least one line of its panel on screen (not hidden, not squeezed
        to its border, pushed out of its row or below the bottom)."""
        if not box.display:
            return False
        visible = box.region
        for container in box.ancestors:  # each clips what overflows it
            if isinstance(container, Widget):
                visible = visible.intersection(container.region)
        return visible.height > 2 and visible.width > 2

    def action_zoom(self) -> None:
        if self.screen.maximized is not None:
            self.screen.minimize()
            return
        focused = self.focused
        for selector in PANELS.values():
            box = self.query_one(selector)
            if focused is not None and (focused is box or box in focused.ancestors):
                self.screen.maximize(box, container=False)
                return

    def action_close_help(self) -> None:
        """Escape closes the help panel (when it is not open, Escape is not bound here)."""
        self.action_hide_help_panel()

    def action_help(self) -> None:
        if self.screen.query("KeyHelp"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    def action_show_help_panel(self) -> None:
        """Open the help: every key that works now, from the key table (ui/widgets/key_help.py)
        instead of Textual's help panel."""
        from optui.ui.widgets.key_help import KeyHelp

        if not self.screen.query(KeyHelp):
            self.screen.mount(KeyHelp())
            self.call_after_refresh(self._bars_again)  # the bar says how to close it

    def action_hide_help_panel(self) -> None:
        if self.screen.query("KeyHelp"):
            self.screen.query("KeyHelp").remove()
            self.call_after_refresh(self._bars_again)

    def _bars_again(self) -> None:
        for bar in self.screen.query(KeyBar):
            bar.update_keys()

    def action_messages(self) -> None:
        """The message log: every toast of this window with its whole text, newest first
        (a toast shows at most :data:`TOAST_LINES` lines)."""
        from optui.ui.screens.details import DetailsScreen

        self.clear_notifications()  # every toast is in the log it opens (they covered its text)
        self.push_screen(DetailsScreen(f"Messages ({len(self.messages)}, newest first) — Esc closes",
                                       messages_text(self.messages)))

    def action_command_log(self) -> None:
        from optui.ui.screens.command_log import CommandLogScreen

        if self.client is not None:
            self.push_screen(CommandLogScreen(self.client.command_log_records()))

    def action_pause(self) -> None:
        if self.client is not None:
            self.client.set_paused(not self.client.snapshot().paused)

    def action_refresh(self) -> None:
        if self.client is not None:
            self.client.refresh_now()

    # ---------------------------------------------------------- actions: the domains' global keys
    def action_restart(self) -> None:
        self.server_actions.restart_selected()

    def action_rollback(self) -> None:
        self.server_actions.rollback_selected()

    def action_server_log(self) -> None:
        self.server_actions.log_of_selected()

    def action_bench(self) -> None:
        self.bench_actions.choose_and_run()

    def action_abort_bench(self) -> None:
        self.bench_actions.abort()

    def action_stop_experiments(self) -> None:
        self.todo_actions.stop_runs()

    async def action_note(self) -> None:
        await self.journal_actions.note()

    def action_experiments(self) -> None:
        self.journal_actions.experiments()

    def action_results_view(self) -> None:
        """The results view from any panel (a new user pressed v in the todo panel: nothing)."""
        self.bench_actions.show_results()

    # ---------------------------------------------------------- the panels' messages
    # Handled by name (on_<panel>_<message>), not with @on: @on needs the message classes when
    # this class is made, and the panels are imported after the first frame (see compose).
    async def on_todo_panel_add(self, msg) -> None:
        await self.todo_actions.add(msg.text)

    async def on_todo_panel_save(self, msg) -> None:
        await self.todo_actions.save(msg.item, msg.text)

    async def on_todo_panel_cycle(self, msg) -> None:
        await self.todo_actions.cycle(msg.item)

    async def on_todo_panel_cancel(self, msg) -> None:
        await self.todo_actions.cancel(msg.item)

    async def on_todo_panel_prioritize(self, msg) -> None:
        await self.todo_actions.prioritize(msg.item, msg.up)

    async def on_todo_panel_move(self, msg) -> None:
        await self.todo_actions.move(msg.item, msg.delta)

    async def on_todo_panel_delete(self, msg) -> None:
        await self.todo_actions.delete(msg.item)

    async def on_todo_panel_undo(self, msg) -> None:
        await self.todo_actions.undo()

    def on_todo_panel_run(self, msg) -> None:
        self.todo_actions.run_experiments([msg.item])

    def on_todo_panel_queue_all(self, msg) -> None:
        self.todo_actions.run_experiments(None)

    def on_todo_panel_edit_experiment(self, msg) -> None:
        self.todo_actions.edit_experiment(msg.item)

    async def on_todo_panel_history(self, msg) -> None:
        await self.todo_actions.show_todo_history(msg.item)

    def on_fleet_grid_host_chosen(self, msg) -> None:
        snapshot = msg.control.snapshot
        self.fleet_actions.show_host(msg.host, snapshot.hosts().get(msg.host, ()), snapshot.servers_by_host().get(msg.host, ()),
                                     msg.control.history)

    def on_fleet_grid_filter_asked(self, msg) -> None:
        self.fleet_actions.ask_filter(msg.current, msg.control.set_filter)

    def on_gpu_panel_fleet_key(self, msg) -> None:
        grid = self.query_one("#fleet")  # `/` or `i` on the configured hosts: the grid's keys
        focus_now(grid)
        getattr(grid, f"action_{msg.action}")()

    def on_bench_panel_abort(self, msg) -> None:
        self.bench_actions.abort_asked()

    def on_bench_panel_sweep(self, msg) -> None:
        self.bench_actions.sweep_asked()

    def on_bench_panel_repeat(self, msg) -> None:
        self.bench_actions.repeat_asked()

    def on_bench_panel_pin(self, msg) -> None:
        self.bench_actions.pin_asked(msg.row)

    def on_bench_panel_results(self, msg) -> None:
        self.bench_actions.show_results()

    def on_server_panel_command(self, msg) -> None:
        self.server_actions.show_command(msg.name)

    async def on_journal_panel_opened(self, msg) -> None:
        await self.journal_actions.open_event(msg.event)

    def on_journal_panel_filter_changed(self, msg) -> None:
        self.journal_actions.filter_changed()

    @on(JournalQueried)
    def _journal_queried(self, msg: JournalQueried) -> None:
        self.journal_actions.journal_queried(msg)

    async def action_quit(self) -> None:  # async like App.action_quit, which it replaces
        self.exit()  # the session is closed in on_unmount, once

    async def on_unmount(self) -> None:
        """Stop the session's work (benchmarks; demo servers) exactly once."""
        if self._session_closed:
            return
        self._session_closed = True
        if self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.close()

"""The GPU panel in fleet mode (``[fleet]``): a dense grid, one row per host, one cell per GPU.

A cell is a block whose height is the GPU's utilization (``▁`` to ``█``, ``?`` when its
series is missing), in the memory colour when the GPU holds memory and the utilization
colour otherwise; an idle GPU that holds memory (utilization under
:data:`~optui.core.fleet.filter.IDLE_UTIL_PCT` %, more than
:data:`~optui.core.fleet.filter.HOLDING_PCT` % of its memory taken) is drawn in the
warning colour, a stale one as a dim ``·``. After the cells: the host's mean utilization, free
memory, the load of its inference servers (``vllm 12+3 45% 810t/s``: running + waiting
requests, KV cache, generated tok/s), hottest GPU and power, as the width allows. The first row sums the fleet up and says
how it is sorted and filtered, and why the last query failed.

``s`` cycles the sort (host, most free memory, busiest, hottest, most idle-but-holding GPUs),
``/`` filters hosts by a glob and GPU thresholds (``gpu-a* free>40G util<10``:
:mod:`optui.core.fleet.filter`), ``i`` shows only hosts with idle GPUs that hold memory; the cursor is always on a host (the
first after a sort or filter: :meth:`FleetGrid.validate_cursor`) and Enter posts :class:`FleetGrid.HostChosen` (the app opens the host's details, with
each GPU's utilization and memory over the readings the grid showed: :attr:`FleetGrid.history`).
"""

from __future__ import annotations

from collections import deque

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.strip import Strip

from optui.core.fleet.filter import HostFilter, idle_holding, parse_host_filter
from optui.core.fleet.readings import FleetGpu, FleetServer, FleetSnapshot
from optui.core.text.safe_text import safe_line
from optui.ui.colors import style
from optui.ui.widgets.cursor_list import CursorList
from optui.ui.widgets.meters import fmt_mib, truncate

BLOCKS = "▁▂▃▄▅▆▇█"
#: readings kept per GPU for its host's details (5 min at the default 2 s)
HISTORY_POINTS = 150
HOT_TEMP_C = 85.0
SUMMARY_KEY = ("fleet-summary",)
SORTS = ("host", "free", "util", "temp", "idle")
SORT_TITLES = {"host": "host", "free": "free memory", "util": "utilization", "temp": "temperature",
               "idle": "idle holding memory"}


def blocks(values, width: int) -> str:
    """The last ``width`` of ``values`` (0-100 %, None: a gap shown as a space) as blocks."""
    out = []
    for value in list(values)[-width:]:
        out.append(" " if value is None else BLOCKS[min(len(BLOCKS) - 1, int(max(0.0, value) / 100.0 * len(BLOCKS)))])
    return "".join(out)


def server_load(server: FleetServer) -> str:
    """``vllm 12+3 45% 810t/s``: kind, requests running + waiting, KV cache, generated tok/s
    (``?`` for a missing series); a stale server: ``vllm stale 42s`` (no new sample for 42 s)."""
    def n(value: float | None, unit: str = "") -> str:
        return "?" if value is None else f"{value:.0f}{unit}"
    if server.stale:
        return f"{server.kind} stale {n(server.age_s, 's')}"
    return f"{server.kind} {n(server.running)}+{n(server.waiting)} {n(server.kv_cache_pct, '%')} {n(server.gen_tok_s, 't/s')}"


def prometheus_load(server: FleetServer) -> str:
    """A configured server's series in the fleet, for its row in the Servers panel
    (``prom vllm 12+3 45% 810t/s``; see :func:`server_load`)."""
    return f"prom {server_load(server)}"


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _sum(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def sort_hosts(hosts: dict[str, tuple[FleetGpu, ...]], by: str) -> list[str]:
    """Host names in the order of sort ``by`` (one of :data:`SORTS`; unknown values last,
    ties by name)."""
    def key(name: str):
        gpus = hosts[name]
        if by == "free":
            value = _sum([g.mem_free_mib for g in gpus])
            return (value is None, -(value or 0.0), name)
        if by == "util":
            value = _mean([g.util_gpu_pct for g in gpus])
            return (value is None, -(value or 0.0), name)
        if by == "temp":
            value = max((g.temp_c for g in gpus if g.temp_c is not None), default=None)
            return (value is None, -(value or 0.0), name)
        if by == "idle":
            return (-sum(idle_holding(g) for g in gpus), name)
        return (name,)
    return sorted(hosts, key=key)


def plain_segments(line: Text, base: Style) -> list[Segment] | None:
    """``line`` as segments over ``base`` when its spans do not overlap (a row is built by
    appends, each its own style), else None. Rich's ``Text.render`` resolves overlapping spans
    for every cell change: half a row's drawing cost."""
    plain, out, at = line.plain, [], 0
    if line.style:
        base = base + (Style.parse(line.style) if isinstance(line.style, str) else line.style)
    for span in sorted(line.spans, key=lambda sp: sp.start):
        if span.start < at:
            return None
        if span.start > at:
            out.append(Segment(plain[at:span.start], base))
        if span.end > span.start:
            extra = Style.parse(span.style) if isinstance(span.style, str) else span.style
            out.append(Segment(plain[span.start:span.end], base + extra))
        at = max(at, span.end)
    if at < len(plain):
        out.append(Segment(plain[at:], base))
    return out


class FleetGrid(CursorList):
    """Renders the :class:`~optui.core.fleet.readings.FleetSnapshot` given by :meth:`show` (no I/O)."""

    BINDINGS = [
        Binding("enter", "choose_host", "Host", id="fleet.host"),
        Binding("s", "cycle_sort", "Sort", id="fleet.sort"),
        Binding("slash", "filter_hosts", "Filter", id="fleet.filter"),
        Binding("i", "toggle_idle", "Idle", id="fleet.idle"),
    ]
    SCOPED_CSS = False  # its rules name the screen's layout classes
    # the box grows with its rows up to what its row of the layout shows (60 % of the screen;
    # all of it zoomed): a taller list would window its cursor below the visible part
    DEFAULT_CSS = """
    FleetGrid { height: auto; min-height: 1; width: 100%; max-height: 50vh; }
    Screen.-medium FleetGrid { max-height: 40vh; }
    Screen.-narrow FleetGrid { max-height: 30vh; }  /* a side pane: Todo and Bench keep their rows */
    Screen.-maximized-view FleetGrid { max-height: 90vh; }
    """

    class HostChosen(Message):
        """Enter on a host's row: ``host`` is its name, ``grid`` the grid (its snapshot)."""

        def __init__(self, grid: FleetGrid, host: str) -> None:
            super().__init__()
            self.grid = grid
            self.host = host

        @property
        def control(self) -> FleetGrid:
            return self.grid

    class FilterAsked(Message):
        """``/``: the app asks for a filter and calls the grid's :meth:`FleetGrid.set_filter`."""

        def __init__(self, grid: FleetGrid, current: str) -> None:
            super().__init__()
            self.grid = grid
            self.current = current

        @property
        def control(self) -> FleetGrid:
            return self.grid

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(empty_text="waiting for the fleet…", id=id)
        self.snapshot = FleetSnapshot()
        self.sort = "host"
        self.host_filter = HostFilter()
        self.only_idle = False
        self.cursor_when_blurred = False
        self._hosts: dict[str, tuple[FleetGpu, ...]] = {}
        self._servers: dict[str, tuple[FleetServer, ...]] = {}
        # host → (what its row shows, the row): a sort or a filter rebuilds no row (64 rows: 45 ms)
        self._row_cache: dict[str, tuple[tuple, Text]] = {}
        self._styles: dict[str, Style] = {}
        # row key → its drawn line (the Text object, width, look): a repaint (a sort, a tick
        # that changed some hosts) converts only rows that changed, not the whole window
        self._strips: dict[object, tuple[Text, int, object, Strip]] = {}
        self._sorted: dict[str, list[str]] = {}  # sort → host names, for the snapshot shown
        self._idle: dict[str, int] = {}  # host → its idle GPUs holding memory
        self._stale = 0
        #: GPU key → its last :data:`HISTORY_POINTS` (utilization %, memory taken %) as shown
        self.history: dict[str, deque[tuple[float | None, float | None]]] = {}

    def show(self, snapshot: FleetSnapshot | None) -> None:
        """Display ``snapshot`` (the same value again: nothing to do)."""
        if snapshot is None or snapshot is self.snapshot:
            return
        self.snapshot = snapshot
        self._hosts = snapshot.hosts()
        self._servers = snapshot.servers_by_host()
        # what a key needs of this snapshot, counted once (a key re-sorted 512 GPUs' figures)
        self._sorted = {}
        self._idle = {host: sum(idle_holding(g) for g in gpus) for host, gpus in self._hosts.items()}
        self._stale = sum(g.stale for g in snapshot.gpus)
        for gpu in snapshot.gpus:  # what each GPU showed, for its host's details
            if not gpu.stale:
                total = gpu.mem_total_mib
                mem = 100.0 * (gpu.mem_used_mib + (gpu.mem_reserved_mib or 0.0)) / total \
                    if total and gpu.mem_used_mib is not None else None
                self.history.setdefault(gpu.key, deque(maxlen=HISTORY_POINTS)).append((gpu.util_gpu_pct, mem))
        self._render_grid()

    def set_filter(self, text: str) -> None:
        """Show only the hosts that filter ``text`` matches (``gpu-a* free>40G``; ``''``: all;
        :func:`~optui.core.fleet.filter.parse_host_filter`), the cursor on the first. Raises
        :class:`~optui.core.fleet.filter.FilterError` for a bad term, the filter unchanged."""
        self.host_filter = parse_host_filter(text)
        self._render_grid(first_host=True)

    def validate_cursor(self, value: int) -> int:
        """The cursor is always on a host when one is shown: the summary row is not one (Enter
        on it did nothing, and its highlight read as no row selected)."""
        return max(1, value) if len(getattr(self, "_keys", ())) > 1 else 0

    def shown_hosts(self) -> list[str]:
        """The hosts on screen, in order (after the sort and filters)."""
        if self.sort not in self._sorted:
            self._sorted[self.sort] = sort_hosts(self._hosts, self.sort)
        flt, hosts = self.host_filter, self._hosts
        return [h for h in self._sorted[self.sort]
                if (not self.only_idle or self._idle[h]) and flt.matches(h, hosts[h])]

    def on_resize(self) -> None:
        self._render_grid()

    def render_line(self, y: int) -> Strip:
        """Line ``y`` of the window (Textual's line API): each row is one line, drawn once into
        a strip and kept while its Text, the width and its cursor look stay (the list's
        ``render`` made one Text of the whole window at every repaint: 25 rows x 200 cells
        through Textual's content pipeline for each key)."""
        count = self._row_count()
        height, width = max(1, self.size.height), max(1, self.size.width)
        if not count:
            return super().render_line(y)
        # the window keeps the cursor row in view (CursorList.render's rule for one-line rows)
        cursor = min(self.cursor, count - 1)
        self._top = max(0, min(max(min(self._top, cursor), cursor - height + 1), count - height))
        index = self._top + y
        base = self.visual_style.rich_style
        if index >= count:
            return Strip.blank(width, base)
        row = self._row_at(index)
        cursor_row = index == self.cursor and (self.has_focus or self.cursor_when_blurred)
        look = (base, cursor_row and self.has_focus, cursor_row)
        key = self._keys[index]
        cached = self._strips.get(key)
        if cached is not None and cached[0] is row and cached[1] == width and cached[2] == look:
            return cached[3]
        line = row.copy()
        line.truncate(width, overflow="ellipsis", pad=cursor_row)
        if cursor_row:
            line.stylize(style(self.app, "block-cursor-foreground", "block-cursor-background", bold=True)
                         if self.has_focus else style(self.app, bg="block-cursor-blurred-background"))
        segments = None if cursor_row else plain_segments(line, base)
        if segments is None:  # overlapping styles (the cursor row): Rich's general rendering
            line.stylize_before(base)
            segments = list(line.render(self.app.console))
        strip = Strip(segments, line.cell_len).crop_extend(0, width, base)
        if len(self._strips) > 2 * count + 8:  # hosts that left the list
            self._strips.clear()
        self._strips[key] = (row, width, look, strip)
        return strip

    def action_cycle_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self._render_grid(first_host=True)

    def action_toggle_idle(self) -> None:
        self.only_idle = not self.only_idle
        self._render_grid(first_host=True)

    def action_filter_hosts(self) -> None:
        self.post_message(self.FilterAsked(self, self.host_filter.text))

    def action_choose_host(self) -> None:
        key = self.current_key
        if isinstance(key, str):
            self.post_message(self.HostChosen(self, key))

    def _render_grid(self, first_host: bool = False) -> None:
        """Rebuild the rows for the snapshot, sort and filters; ``first_host``: the cursor on
        the first host (a new sort or filter), else it follows its host."""
        width = max(20, self.size.width or 80)
        hosts = self._hosts
        names = self.shown_hosts()
        name_w = max(4, min(max((len(h) for h in names), default=8), 24 if width >= 100 else 14))
        app = self.app
        self._styles = {name: style(app, name) for name in ("warning", "error", "gpu-hot", "gpu-mem-used", "gpu-util")}
        self._styles["host"] = style(app, "primary", bold=True)
        summary = self._summary(hosts, names, width)
        cache, servers_of, theme = self._row_cache, self._servers, app.theme

        def build(index: int) -> Text:  # only the rows drawn are built (a tick changes every host's)
            if index == 0:
                return summary
            name = names[index - 1]
            gpus, servers = hosts[name], servers_of.get(name, ())
            cached = cache.get(name)
            if cached is not None:
                was = cached[0]
                if (was[0] is gpus or was[0] == gpus) and was[1:] == (servers, width, name_w, theme):
                    return cached[1]
            cached = cache[name] = ((gpus, servers, width, name_w, theme),
                                    self._host_row(name, gpus, width, name_w, servers))
            return cached[1]
        self.set_lazy_rows([SUMMARY_KEY, *names], build)
        if first_host:
            self.cursor = 1

    def _lines_upto(self, limit: int) -> int:
        return min(self._row_count(), limit)  # one line a row: no row is built to count them

    def rows(self) -> list[Text]:
        """Every row as drawn (the summary, then one per shown host), built now."""
        return [self._row_at(i) for i in range(self._row_count())]

    def _summary(self, hosts: dict[str, tuple[FleetGpu, ...]], names: list[str], width: int) -> Text:
        """The first row: counts, the sort and the filters, idle and stale GPUs, the query's
        error. When it does not fit ``width`` the sort and filters come in short form first
        (``9/64 hosts · /gpu-a* · idle only · sort free``): a side pane cut them at ``hosts fl…``."""
        gpus = self.snapshot.gpus
        stale, idle = self._stale, sum(self._idle.values())
        line = Text(no_wrap=True, overflow="ellipsis")
        long = (f"{len(hosts)} hosts {len(gpus)} GPUs" + (f" ({len(names)} shown)" if len(names) != len(hosts) else "")
                + f" · sort {SORT_TITLES[self.sort]}"
                + (f" · hosts {safe_line(self.host_filter.text)}" if self.host_filter.text else "")
                + (" · idle holding memory only" if self.only_idle else ""))
        if len(long) <= width:
            line.append(f"{len(hosts)} hosts {len(gpus)} GPUs", style="bold")
            if len(names) != len(hosts):
                line.append(f" ({len(names)} shown)")
            line.append(f" · sort {SORT_TITLES[self.sort]}", style="dim")
            if self.host_filter.text:
                line.append(f" · hosts {safe_line(self.host_filter.text)}", style="dim")
            if self.only_idle:
                line.append(" · idle holding memory only", style="dim")
        else:
            line.append(f"{len(names)}/{len(hosts)} hosts" if len(names) != len(hosts) else f"{len(hosts)} hosts",
                        style="bold")
            if self.host_filter.text:  # what is shown first, then its order (host: the default)
                line.append(f" · /{safe_line(self.host_filter.text)}", style="dim")
            if self.only_idle:
                line.append(" · idle only", style="dim")
            if self.sort != "host":
                line.append(f" · sort {self.sort}", style="dim")
        if idle:
            line.append(f" · {idle} idle holding", style=style(self.app, "warning"))
        if stale:
            line.append(f" · {stale} stale", style=style(self.app, "warning"))
        if self.snapshot.error:
            line.append(f" · {safe_line(self.snapshot.error)}", style=style(self.app, "error"))
        return line

    def _cell(self, gpu: FleetGpu) -> tuple[str, str | Style]:
        styles = self._styles
        if gpu.stale:
            return "·", "dim"
        util = gpu.util_gpu_pct
        char = "?" if util is None else BLOCKS[min(len(BLOCKS) - 1, int(max(0.0, util) / 100.0 * len(BLOCKS)))]
        if idle_holding(gpu):
            return char, styles["warning"]
        if gpu.temp_c is not None and gpu.temp_c >= HOT_TEMP_C:
            return char, styles["gpu-hot"]
        holds = gpu.mem_used_mib is not None and gpu.mem_total_mib and gpu.mem_used_mib / gpu.mem_total_mib > 0.1
        return char, styles["gpu-mem-used" if holds else "gpu-util"]

    def _host_row(self, name: str, gpus: tuple[FleetGpu, ...], width: int, name_w: int,
                  servers: tuple[FleetServer, ...] = ()) -> Text:
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{truncate(name, name_w):<{name_w}} ", style=self._styles["host"])
        for gpu in gpus:
            char, cell_style = self._cell(gpu)
            line.append(char, style=cell_style)
        util = _mean([g.util_gpu_pct for g in gpus if not g.stale])
        used = len(line.plain)
        optional = [f" {util:>3.0f}%" if util is not None else "  n/a",
                    f" free {fmt_mib(_sum([g.mem_free_mib for g in gpus]))}"]
        if servers:  # the inference servers on the host, their live load (whoever controls them)
            optional.append(" " + " ".join(server_load(srv) for srv in servers))
        temps = [g.temp_c for g in gpus if g.temp_c is not None]
        if temps:
            optional.append(f" {max(temps):.0f}°C")
        power = _sum([g.power_w for g in gpus])
        if power is not None:
            optional.append(f" {power / 1000:.1f} kW")
        stale = [g for g in gpus if g.stale]
        tail = f" stale {max(g.age_s or 0.0 for g in stale):.0f}s" if stale else ""
        for text in optional:
            if used + len(text) + len(tail) > width:
                break  # less important parts are left out whole
            used += len(text)
            line.append(text)
        if tail:
            line.append(tail, style=self._styles["warning"])
        return line

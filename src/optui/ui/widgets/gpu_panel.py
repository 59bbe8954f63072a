"""The GPU panel: one line per GPU of every host, meters on fixed scales, history.

Per GPU: memory bar (used + reserved against total, MiB), utilization bar (0-100 %),
utilization and memory history of the last 5 minutes (sparklines in green and in the
memory colour, as wide as there is room; gaps where readings were missing), temperature
and power / limit. Missing values read "n/a", never 0. A host whose source failed shows
one explanatory line; a stale host is dimmed with the age of its data. Zoomed (``z``), each
GPU's compute processes follow its line: PID, the server they belong to, GPU memory.
"""

from __future__ import annotations

import time

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.message import Message

from optui.core.gpu.samples import GpuSample, HostSnapshot, HostStatus, server_of_process
from optui.core.server.state import ServerStatus
from optui.core.text.safe_text import safe_line
from optui.session.state import GpuHistoryWindow, GpuSeries
from optui.ui.colors import style
from optui.ui.widgets.cursor_list import CursorList
from optui.ui.widgets.meters import fmt_mib, fmt_value, pct_bar, resample, sparkline, stacked_bar, truncate

HOT_TEMP_C = 85.0


class GpuPanel(CursorList):
    """Renders host snapshots given by :meth:`show` (no I/O here).

    A rack: one row per host — expanded (a header line + one line per GPU) or collapsed
    (one summary line with a mini bar per GPU for memory and utilization). Few hosts start
    expanded, many start collapsed so 8 hosts x 8 GPUs fit, and so do hosts whose GPU lines
    would take more than :attr:`max_rows` (a short side pane); Enter/space toggles the host
    under the cursor, ``e`` expands or collapses all.
    """

    BINDINGS = [
        Binding("enter,space", "toggle_host", "Expand", id="gpus.toggle"),
        Binding("e", "toggle_all", "Expand all", show=False, id="gpus.toggle_all"),
        # with a fleet grid below (fleet_keys): its keys move to it and work there
        Binding("slash", "fleet('filter_hosts')", "Filter fleet", show=False, id="gpus.fleet_filter"),
        Binding("i", "fleet('toggle_idle')", "Idle fleet hosts", show=False, id="gpus.fleet_idle"),
    ]

    class FleetKey(Message):
        """``/`` or ``i`` on the configured hosts with a fleet grid (:attr:`GpuPanel.fleet_keys`):
        the app focuses the grid and runs its ``action`` (``filter_hosts``, ``toggle_idle``)."""

        def __init__(self, action: str) -> None:
            super().__init__()
            self.action = action
    DEFAULT_CSS = "GpuPanel { height: auto; min-height: 1; width: 100%; }"
    #: hosts start collapsed when there are more than this many
    EXPAND_UP_TO_HOSTS = 2

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(empty_text="waiting for GPU data…", id=id)
        self._hosts: tuple[HostSnapshot, ...] = ()
        self._shown: tuple | None = None  # the (hosts, history) on screen
        self._history: dict[tuple[str, int], GpuSeries] = {}
        self._points = 0
        self._expanded: dict[str, bool] = {}
        self.mem_alert_pct = 95.0
        #: a fleet grid shares the panel: ``/`` and ``i`` go to it (they did nothing here)
        self.fleet_keys = False
        #: rows the panel may take with hosts expanded (see :meth:`set_max_rows`)
        self.max_rows: int | None = None
        #: each GPU's compute processes under its line (the zoomed panel, :meth:`set_show_processes`)
        self.show_processes = False
        self._server_pids: dict[str, dict[int, str]] = {}  # host → {server PID: server name}
        #: (host, GPU index) → (shown values, history charts drawn, line): see _gpu_line
        self._lines: dict[tuple[str, int], tuple[tuple, tuple, Text]] = {}
        self.cursor_when_blurred = False

    def show(self, hosts: tuple[HostSnapshot, ...], history: GpuHistoryWindow | None = None,
             servers: tuple[ServerStatus, ...] = ()) -> None:
        """Display ``hosts`` and their GPUs' history; ``servers`` name the GPU processes
        that are theirs (the same values again: nothing to do)."""
        owners: dict[str, dict[int, str]] = {}
        for server in servers:
            if server.pid is not None:
                owners.setdefault(server.host, {})[server.pid] = server.name
        shown = (hosts, history, owners)
        if shown == self._shown:
            return
        self._shown = shown
        self._hosts = hosts
        self._server_pids = owners
        self._history = history.by_gpu() if history is not None else {}
        self._points = history.points if history is not None else 0
        self._render_hosts()

    def _render_hosts(self) -> None:
        hosts = self._hosts
        width = max(20, self.size.width or 80)
        default = self._expanded_by_default()
        # the names' column: as long as the longest name, within what the width can spare
        name_w = max(4, min(max((len(h.host) for h in hosts), default=14), 32 if width >= 100 else 14))
        rows = []
        for host in hosts:
            expanded = self._expanded.get(host.host, default)
            rows.append(self._host_rows(host, width, expanded, single=len(hosts) == 1, name_w=name_w))
        self.set_rows([h.host for h in hosts], rows)

    def _expanded_by_default(self) -> bool:
        """Hosts not toggled yet start expanded: few hosts whose GPU lines fit in
        :attr:`max_rows`."""
        hosts = self._hosts
        if len(hosts) > self.EXPAND_UP_TO_HOSTS:
            return False
        lines = sum(len(h.samples) for h in hosts) + (len(hosts) if len(hosts) > 1 else 0)
        return self.show_processes or self.max_rows is None or lines <= self.max_rows

    def set_show_processes(self, on: bool) -> None:
        """Show each GPU's compute processes (PID, the server it belongs to or its program,
        GPU memory) under the GPU's line, hosts expanded; the app turns it on while the
        panel is zoomed."""
        if on != self.show_processes:
            self.show_processes = on
            self._render_hosts()

    def set_max_rows(self, rows: int | None) -> None:
        """The rows the panel may take with hosts expanded (None: no limit); more than that
        and hosts not toggled yet show one summary line each. The app sets it from the
        terminal's height in a side pane."""
        if rows != self.max_rows:
            self.max_rows = rows
            self._render_hosts()

    def on_resize(self) -> None:
        self._render_hosts()

    def action_toggle_host(self) -> None:
        key = self.current_key
        if isinstance(key, str):  # a host's row (its key is the host name)
            self._expanded[key] = not self._expanded.get(key, self._expanded_by_default())
            self._render_hosts()

    def action_toggle_all(self) -> None:
        default = self._expanded_by_default()
        any_collapsed = any(not self._expanded.get(h.host, default) for h in self._hosts)
        self._expanded = {h.host: any_collapsed for h in self._hosts}
        self._render_hosts()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.fleet_keys if action == "fleet" else True

    def action_fleet(self, action: str) -> None:
        self.post_message(self.FleetKey(action))

    def _host_rows(self, host: HostSnapshot, width: int, expanded: bool, single: bool, name_w: int) -> Text:
        if not expanded or not host.samples:
            return self._host_summary(host, width, name_w)
        lines = [] if single else [self._host_line(host, width)]
        for sample in host.samples:
            lines.append(self._gpu_line(host, sample, width))
            if self.show_processes:
                lines.extend(self._process_lines(host, sample, width))
        return Text("\n").join(lines)

    def _process_lines(self, host: HostSnapshot, s: GpuSample, width: int) -> list[Text]:
        """One line per compute process of GPU ``s``, most memory first: PID, the server
        it belongs to (its PID or an ancestor's is the server's) or else its program's
        name, GPU memory."""
        app = self.app
        if s.processes is None:
            return [Text("     processes n/a (not reported by this GPU source)", style="dim")]
        if not s.processes:
            return [Text("     no processes", style="dim")]
        owners = self._server_pids.get(host.host, {})
        lines = []
        for proc in sorted(s.processes, key=lambda p: -(p.used_mib or 0.0)):
            server = server_of_process(proc, owners)
            program = proc.name.rsplit("/", 1)[-1] or "?"
            line = Text(no_wrap=True, overflow="ellipsis")
            line.append(f"     {proc.pid:>7} ", style="dim")
            if server is not None:
                line.append(f"{truncate(server, 16):<16} ", style=style(app, "primary", bold=True))
            else:
                line.append(f"{truncate(program, 16):<16} ", style="dim")
            line.append(f"{fmt_mib(proc.used_mib):>7}")
            if server is not None and width >= 50:
                line.append(f"  {truncate(program, width - 40)}", style="dim")
            lines.append(line)
        return lines

    def _host_summary(self, host: HostSnapshot, width: int, name_w: int = 14) -> Text:
        """One line for a host: state, a mini bar per GPU for memory and for utilization
        (fixed 0-100 % scale) and the host's utilization, then as many of memory totals,
        hottest GPU, GPU count and model, total power as the width has room for (in that
        order of importance, each whole or not at all). ``name_w``: the host names' column."""
        app = self.app
        line = Text(no_wrap=True, overflow="ellipsis")
        if not host.samples or host.status not in (HostStatus.LIVE, HostStatus.STALE, HostStatus.LOST):
            line.append(f"{truncate(host.host, name_w):<{name_w}} ", style=style(app, "primary", bold=True))
            line.append_text(self._host_state_text(host))
            return line
        dim = host.status is not HostStatus.LIVE
        names = {(s.name or "").replace("NVIDIA ", "") for s in host.samples}
        model = names.pop() if len(names) == 1 else "mixed"
        empty = style(app, "meter-empty")
        bars = Text()
        bars.append("m", style="dim")
        bars.append_text(sparkline([s.mem_used_pct for s in host.samples], len(host.samples), style(app, "gpu-mem-used"), empty))
        bars.append(" u", style="dim")
        bars.append_text(sparkline([s.util_gpu_pct for s in host.samples], len(host.samples), style(app, "gpu-util"), empty))
        util = host.util_gpu_pct
        bars.append(f" {util:>3.0f}%" if util is not None else "  n/a")
        temps = [s.temp_c for s in host.samples if s.temp_c is not None]
        power = [s.power_w for s in host.samples if s.power_w is not None]
        # (text, style) after the bars, most important first; the bars stay in one column
        optional: list[tuple[str, str | Style]] = [(f" {fmt_mib(host.mem_used_mib)}/{fmt_mib(host.mem_total_mib)}", "")]
        if temps:
            optional.append((f" {max(temps):.0f}°C", style(app, "gpu-hot") if max(temps) >= HOT_TEMP_C else ""))
        optional.append((f" {len(host.samples)}×{truncate(model, 12)}", "dim" if dim else ""))
        if power:
            optional.append((f" {sum(power) / 1000:.1f} kW", ""))
        state = Text(" ").append_text(self._host_state_text(host)) if host.status is not HostStatus.LIVE else Text()
        used = name_w + 1 + len(bars.plain) + len(state.plain)
        line.append(f"{truncate(host.host, name_w):<{name_w}} ", style=style(app, "primary", bold=True))
        line.append_text(bars)
        for text, part_style in optional:
            if used + len(text) > width:
                break  # the rest are less important: left out whole, never half
            used += len(text)
            line.append(text, style=part_style)
        line.append_text(state)
        if dim:
            line.stylize("dim")
        return line

    def _host_state_text(self, host: HostSnapshot) -> Text:
        if host.status is HostStatus.CONNECTING:
            return Text("connecting…", style="dim")
        age = f" {time.time() - host.taken_at:.0f}s" if host.status is HostStatus.STALE and host.taken_at else ""
        return Text(f"{host.status.value}{age}: {safe_line(host.error or '')}", style=style(self.app, "warning"))

    def _host_line(self, host: HostSnapshot, width: int) -> Text:
        line = Text()
        line.append(truncate(host.host, 16), style=style(self.app, "primary", bold=True))
        if host.status in (HostStatus.LIVE,) and host.samples:
            used, total = host.mem_used_mib, host.mem_total_mib
            line.append(f"  {len(host.samples)} GPU  mem {fmt_mib(used)}/{fmt_mib(total)}")
            line.append(f"  util {fmt_value(host.util_gpu_pct)}%")
        elif host.status is HostStatus.CONNECTING:
            line.append("  connecting…", style="dim")
        else:
            line.append("  ")
            line.append_text(self._host_state_text(host))
        return line

    def _gpu_line(self, host: HostSnapshot, s: GpuSample, width: int) -> Text:
        """GPU ``s``'s line, drawn again only when what it shows changed: a GPU source reads
        every second, and an idle GPU's readings move (power in tenths of a W, the history
        window) where its line does not (an idle H200 window rebuilt its line 55 times in 55 s
        for 10 changes: 30 % of its event loop's CPU). The key is what the line shows (the
        numbers as printed, the warning colours, the width, the theme) and the history cells,
        resampled here at the widths the last drawing gave its charts."""
        shown = self._shown_values(host, s, width)
        kept = self._lines.get((host.host, s.index))
        if kept is not None and kept[0] == shown and kept[1] == self._history_cells(host, s, kept[1]):
            return kept[2]
        charts: list[tuple[int, tuple]] = []
        line = self._draw_gpu_line(host, s, width, charts)
        self._lines[(host.host, s.index)] = (shown, tuple(charts), line)
        return line

    def _shown_values(self, host: HostSnapshot, s: GpuSample, width: int) -> tuple:
        """What GPU ``s``'s line shows but its history cells (see :meth:`_gpu_line`); the
        history window's length (``_points``: no charts while it is 0) is in it."""
        mem_pct = s.mem_used_pct
        narrow = width < 90 and self.screen.has_class("-narrow")  # (as _draw_gpu_line asks it)
        return (self.app.theme, host.status is HostStatus.LIVE, width, narrow, self._points, s.index,
                s.name, s.error, s.mem_used_mib, s.mem_reserved_mib, s.mem_total_mib, s.util_gpu_pct, s.util_mem_pct,
                fmt_value(s.temp_c), fmt_value(s.power_w), fmt_value(s.power_limit_w),
                mem_pct is not None and mem_pct >= self.mem_alert_pct, s.temp_c is not None and s.temp_c >= HOT_TEMP_C,
                bool(s.power_w is not None and s.power_limit_w and s.power_w >= 0.98 * s.power_limit_w))

    def _history_cells(self, host: HostSnapshot, s: GpuSample, drawn: tuple[tuple[int, tuple], ...]) -> tuple:
        """GPU ``s``'s history charts now, at the widths of the ``drawn`` ones: ((width,
        cells), ...) as :meth:`_append_history` records them (utilization, then memory)."""
        series = self._history.get((host.host, s.index))
        values = (series.util, series.mem) if series else ((), ())
        return tuple((each, tuple(resample(v, each, self._points))) for v, (each, _) in zip(values, drawn))

    def _draw_gpu_line(self, host: HostSnapshot, s: GpuSample, width: int, charts: list[tuple[int, tuple]]) -> Text:
        """GPU ``s``'s line at ``width``; ``charts`` gets each history chart's (width, cells)."""
        app = self.app
        dim = host.status is not HostStatus.LIVE
        line = Text(style="dim" if dim else "")
        name = (s.name or "").replace("NVIDIA ", "")
        if s.error:
            line.append(f"{s.index:>2} {truncate(name, 10):<10} ", style=style(app, "error"))
            line.append(safe_line(s.error), style=style(app, "error"))
            return line
        empty = style(app, "meter-empty")
        mem_pct = s.mem_used_pct
        hot_mem = mem_pct is not None and mem_pct >= self.mem_alert_pct
        used_style = style(app, "gpu-hot" if hot_mem else "gpu-mem-used")
        mem_txt = f"{fmt_mib(s.mem_used_mib)}/{fmt_mib(s.mem_total_mib)}"
        util_txt = f"{s.util_gpu_pct:>3.0f}%" if s.util_gpu_pct is not None else " n/a"
        temp_hot = s.temp_c is not None and s.temp_c >= HOT_TEMP_C
        power_hot = s.power_w is not None and s.power_limit_w and s.power_w >= 0.98 * s.power_limit_w
        if width >= 90:
            bar_w = max(8, min(24, (width - 66) // 3))  # the rest goes to the history charts
            line.append(f"{s.index:>2} {truncate(name, 11):<11} ")
            line.append("mem ")
            line.append_text(stacked_bar(bar_w, s.mem_total_mib, [(s.mem_used_mib, used_style), (s.mem_reserved_mib, style(app, "gpu-mem-reserved"))], empty))
            line.append(f" {mem_txt:>11} ")
            line.append("util ")
            line.append_text(pct_bar(bar_w // 2, s.util_gpu_pct, style(app, "gpu-util"), empty))
            line.append(f" {util_txt} ")
            self._append_history(line, host, s, width - len(line.plain) - 24, charts)
            line.append(f"bw {s.util_mem_pct:>3.0f}% " if s.util_mem_pct is not None else "bw  n/a ")
        else:
            named = width >= 56
            free = width - (3 + (12 if named else 0) + 18 + 14)  # index, name, numbers, temp + power
            with_history = not self.screen.has_class("-narrow")  # a side pane keeps its cells for the memory bar
            bar_w = max(4, min(14, free // 2 if with_history else free))
            line.append(f"{s.index:>2} ")
            if named:
                line.append(f"{truncate(name, 11):<11} ")
            line.append_text(stacked_bar(bar_w, s.mem_total_mib, [(s.mem_used_mib, used_style), (s.mem_reserved_mib, style(app, "gpu-mem-reserved"))], empty))
            line.append(f" {mem_txt:>11} {util_txt} ")
            if with_history:
                self._append_history(line, host, s, width - len(line.plain) - 14, charts)
        line.append(f"{fmt_value(s.temp_c):>3}°C ", style=style(app, "gpu-hot") if temp_hot else "")
        power = f"{fmt_value(s.power_w)}/{fmt_value(s.power_limit_w)} W" if width >= 90 else f"{fmt_value(s.power_w)} W"
        line.append(power, style=style(app, "gpu-hot") if power_hot else "")
        return line

    def _append_history(self, line: Text, host: HostSnapshot, s: GpuSample, room: int,
                        charts: list[tuple[int, tuple]]) -> None:
        """Append the GPU's utilization and memory history (the whole window, fixed 0-100 %
        scale, gaps where readings were missing) in ``room`` cells: both sparklines when
        they fit at 6+ cells each, else utilization alone, else nothing. ``charts`` gets each
        chart's (width, cells)."""
        if room < 7 or not self._points:
            return
        series = self._history.get((host.host, s.index))
        span = self._points
        shown = [(series.util if series else (), "gpu-util")]
        if room >= 14:
            shown.append((series.mem if series else (), "gpu-mem-used"))
        each = min(24, room // len(shown) - 1)
        for values, var in shown:
            cells = resample(values, each, span)
            charts.append((each, tuple(cells)))
            line.append_text(sparkline(cells, each, style(self.app, var), style(self.app, "meter-empty")))
            line.append(" ")

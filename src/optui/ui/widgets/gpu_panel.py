"""The GPU panel: one line per GPU of every host, meters on fixed scales, history.

Per GPU: memory bar (used + reserved against total, MiB), utilization bar (0-100 %),
utilization history sparkline (wide layouts), temperature and power / limit. Missing
values read "n/a", never 0. A host whose source failed shows one explanatory line; a
stale host is dimmed with the age of its data.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.widget import Widget

from optui.core.gpu import GpuSample, HostSnapshot, HostStatus
from optui.ui.colors import style
from optui.ui.widgets.meters import fmt_mib, fmt_value, pct_bar, sparkline, stacked_bar, truncate

HOT_TEMP_C = 85.0


class GpuPanel(Widget):
    """Renders host snapshots given by :meth:`show` (no I/O here)."""

    DEFAULT_CSS = "GpuPanel { height: auto; min-height: 1; width: 100%; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._hosts: tuple[HostSnapshot, ...] = ()
        self._history = None
        self.mem_alert_pct = 95.0

    def show(self, hosts: tuple[HostSnapshot, ...], history) -> None:
        """Display ``hosts`` (and per-GPU util history from ``history``)."""
        self._hosts = hosts
        self._history = history
        self.refresh(layout=self._line_count() != self.size.height)

    def _line_count(self) -> int:
        n = 0
        multi = len(self._hosts) > 1
        for h in self._hosts:
            n += (1 if multi else 0) + (len(h.samples) if h.samples else 1)
        return max(1, n)

    def get_content_height(self, container, viewport, width: int) -> int:
        return self._line_count()

    def render(self) -> Text:
        width = max(20, self.size.width)
        out = Text(no_wrap=True, overflow="ellipsis")
        multi = len(self._hosts) > 1
        first = True
        for host in self._hosts:
            lines: list[Text] = []
            if multi or not host.samples:
                lines.append(self._host_line(host, width))
            lines.extend(self._gpu_line(host, s, width) for s in host.samples)
            for line in lines:
                if not first:
                    out.append("\n")
                out.append_text(line)
                first = False
        if first:
            out.append("waiting for GPU data…", style="dim")
        return out

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
            age = f" {time.time() - host.taken_at:.0f}s" if host.status is HostStatus.STALE and host.taken_at else ""
            line.append(f"  {host.status.value}{age}: {host.error or ''}", style=style(self.app, "warning"))
        return line

    def _gpu_line(self, host: HostSnapshot, s: GpuSample, width: int) -> Text:
        app = self.app
        dim = host.status is not HostStatus.LIVE
        line = Text(style="dim" if dim else "")
        name = (s.name or "").replace("NVIDIA ", "")
        if s.error:
            line.append(f"{s.index:>2} {truncate(name, 10):<10} ", style=style(app, "error"))
            line.append(s.error, style=style(app, "error"))
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
            bar_w = max(8, min(24, (width - 66) // 2))
            line.append(f"{s.index:>2} {truncate(name, 11):<11} ")
            line.append("mem ")
            line.append_text(stacked_bar(bar_w, s.mem_total_mib, [(s.mem_used_mib, used_style), (s.mem_reserved_mib, style(app, "gpu-mem-reserved"))], empty))
            line.append(f" {mem_txt:>11} ")
            line.append("util ")
            line.append_text(pct_bar(bar_w // 2, s.util_gpu_pct, style(app, "gpu-util"), empty))
            line.append(f" {util_txt} ")
            hist = self._history.util.get((host.host, s.index), ()) if self._history else ()
            spark_w = max(0, width - len(line.plain) - 24)
            if spark_w >= 6:
                line.append_text(sparkline(hist, min(spark_w, 40), style(app, "gpu-util"), empty))
                line.append(" ")
            line.append(f"bw {s.util_mem_pct:>3.0f}% " if s.util_mem_pct is not None else "bw  n/a ")
        else:
            named = width >= 56
            bar_w = max(4, min(14, width - (54 if named else 40)))
            line.append(f"{s.index:>2} ")
            if named:
                line.append(f"{truncate(name, 11):<11} ")
            line.append_text(stacked_bar(bar_w, s.mem_total_mib, [(s.mem_used_mib, used_style), (s.mem_reserved_mib, style(app, "gpu-mem-reserved"))], empty))
            line.append(f" {mem_txt:>11} {util_txt} ")
        line.append(f"{fmt_value(s.temp_c):>3}°C ", style=style(app, "gpu-hot") if temp_hot else "")
        power = f"{fmt_value(s.power_w)}/{fmt_value(s.power_limit_w)} W" if width >= 90 else f"{fmt_value(s.power_w)} W"
        line.append(power, style=style(app, "gpu-hot") if power_hot else "")
        return line

"""Fleet actions (``[fleet]``): a host's details on Enter, the host filter prompt."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from optui.ui.intents.base import Actions

if TYPE_CHECKING:  # core.fleet.readings (and core.gpu.samples under it) loads with the grid, after the first frame
    from optui.core.fleet.readings import FleetGpu, FleetServer


def host_details(host: str, gpus: tuple[FleetGpu, ...], servers: tuple[FleetServer, ...] = (),
                 configured: dict[str, str] | None = None, history: dict | None = None) -> Text:
    """A host's GPUs, one line each: index, model, memory used / reserved / free (MiB),
    utilization, memory bandwidth (%), temperature (°C), power (W), age of the sample (s);
    ``n/a`` where a series is missing, and each GPU's utilization and memory history
    (``history``: GPU key → (util %, memory %) readings, oldest first); then its inference servers, each named after the
    ``[servers.NAME]`` it is when ``configured`` (name → url) has its address."""
    def cell(value: float | None, digits: int = 0) -> str:
        return "n/a" if value is None else f"{value:.{digits}f}"

    exporters = sorted({g.exporter for g in gpus})
    out = Text(f"{host}: {len(gpus)} GPUs ({', '.join(exporters)})\n\n")
    out.append(f"{'GPU':>3}  {'MODEL':<16} {'USED':>7} {'RSVD':>6} {'FREE MiB':>8} {'UTIL%':>5} {'BW%':>4} "
               f"{'°C':>4} {'W':>6} {'AGE s':>6}\n", style="bold")
    for g in gpus:
        line = (f"{cell(g.index):>3}  {(g.model or 'n/a').replace('NVIDIA ', '')[:16]:<16} {cell(g.mem_used_mib):>7} "
                f"{cell(g.mem_reserved_mib):>6} {cell(g.mem_free_mib):>8} {cell(g.util_gpu_pct):>5} "
                f"{cell(g.util_mem_pct):>4} {cell(g.temp_c):>4} {cell(g.power_w, 1):>6} {cell(g.age_s, 1):>6}")
        out.append(line + (" stale" if g.stale else "") + "\n", style="dim" if g.stale else "")
        out.append(f"     {g.uuid}\n", style="dim")
        points = (history or {}).get(g.key)
        if points:
            from optui.ui.widgets.fleet_grid import blocks

            out.append(f"     util {blocks((u for u, _ in points), 60)}\n     mem  {blocks((m for _, m in points), 60)}"
                       f"   (last {len(points)} readings)\n")
    if servers:
        from optui.core.fleet.readings import configured_server
        from optui.ui.widgets.fleet_grid import server_load

        out.append("\ninference servers (from Prometheus)\n", style="bold")
        for srv in servers:
            out.append(f"  {srv.instance}  {srv.model or 'n/a'}  {server_load(srv)}")
            name = configured_server(srv, configured or {})
            out.append(f"  = [servers.{name}] in optui\n" if name else "\n", style="bold")
    return out


class FleetActions(Actions):
    """What the fleet grid's messages ask for."""

    def show_host(self, host: str, gpus: tuple[FleetGpu, ...], servers: tuple[FleetServer, ...] = (),
                  history: dict | None = None) -> None:
        """The host's details (its GPUs, their history, its inference servers)."""
        from optui.ui.screens.details import DetailsScreen

        configured = {s.name: s.url for s in self.client.snapshot().servers}
        self.push_screen(DetailsScreen(f"host {host}", host_details(host, gpus, servers, configured, history)))

    def ask_filter(self, current: str, apply) -> None:
        """Ask for a host filter (core/fleet/filter); ``apply(text)`` with the answer (Esc:
        nothing changes). A bad term is named in an error and the prompt opens again with it."""
        from optui.core.fleet.filter import FilterError
        from optui.ui.screens.text_prompt import TextPrompt

        def answered(text: str | None) -> None:
            if text is None:
                return
            try:
                apply(text)
            except FilterError as exc:
                self.notify(str(exc), severity="error", timeout=8)
                self.ask_filter(text, apply)

        self.push_screen(TextPrompt("Filter hosts (glob, free>40G, util<10, temp>80, idle; empty: all):",
                                    current, "gpu-a-* free>40G"), answered)

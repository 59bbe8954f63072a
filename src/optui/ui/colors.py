"""Colours from the active theme (never hard-coded in widgets).

optui's own variables (defaults in :data:`OPTUI_VARIABLES`, overridable per theme file):
``gpu-mem-used``, ``gpu-mem-reserved``, ``gpu-util``, ``gpu-hot``, ``meter-empty``,
``state-ready``, ``state-busy``, ``state-down``, ``state-failed``, ``delta-good``,
``delta-bad``.
"""

from __future__ import annotations

from rich.style import Style
from textual.app import App

OPTUI_VARIABLES = {
    "gpu-mem-used": "#5fafff",
    "gpu-mem-reserved": "#d7af5f",
    "gpu-util": "#5fd787",
    "gpu-hot": "#ff5f5f",
    "meter-empty": "#4e4e4e",
    "state-ready": "#5fd75f",
    "state-busy": "#ffd75f",
    "state-down": "#8a8a8a",
    "state-failed": "#ff5f5f",
    "delta-good": "#5fd75f",
    "delta-bad": "#ff5f5f",
}


def color(app: App, name: str) -> str | None:
    """The colour value of theme variable ``name`` (e.g. "gpu-util", "primary"), or None."""
    value = getattr(app, "theme_variables", {}).get(name) or OPTUI_VARIABLES.get(name)
    if not value:
        return None
    # Textual values may carry an alpha suffix ("#ff0000 50%"); Rich wants the colour only
    return value.split()[0]


def style(app: App, fg: str | None = None, bg: str | None = None, *, bold: bool = False, dim: bool = False) -> Style:
    """A Rich style from theme variable names."""
    return Style(color=color(app, fg) if fg else None, bgcolor=color(app, bg) if bg else None, bold=bold, dim=dim)


STATE_VARIABLE = {
    "ready": "state-ready",
    "degraded": "state-busy",
    "starting": "state-busy",
    "warming": "state-busy",
    "stopping": "state-busy",
    "down": "state-down",
    "crashed": "state-failed",
    "hung": "state-failed",
}

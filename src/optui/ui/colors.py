"""Colours from the active theme (never hard-coded in widgets).

optui's own variables (defaults in :data:`OPTUI_VARIABLES`, overridable per theme file):
``gpu-mem-used``, ``gpu-mem-reserved``, ``gpu-util``, ``gpu-hot``, ``meter-empty``,
``state-ready``, ``state-busy``, ``state-down``, ``state-failed``, ``delta-good``,
``delta-bad``, ``panel-border`` (the border of panels without focus).
"""

from __future__ import annotations

from rich.style import Style
from textual.app import App
from textual.color import Color, ColorParseError

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
    "panel-border": "#303030",
}


_CACHE: dict[tuple[int, str, str], str | None] = {}


def color(app: App, name: str) -> str | None:
    """The colour of theme variable ``name`` (e.g. "gpu-util", "primary") as ``#rrggbb``,
    or None when the theme has none. A translucent one is blended onto the theme's
    background, and so is an ``auto N%`` one (``text-muted``): the text colour that contrasts
    with the background (Textual's ``Color.get_contrast_text``) at N %."""
    variables = getattr(app, "theme_variables", None) or {}
    key = (id(variables), getattr(app, "theme", ""), name)
    if key in _CACHE:
        return _CACHE[key]
    value = variables.get(name) or OPTUI_VARIABLES.get(name)
    result = None
    if value:
        try:
            auto, _, percent = value.partition(" ")
            if auto == "auto":
                alpha = float(percent.rstrip("%")) / 100 if percent else 1.0
                parsed = Color.parse(variables.get("background", "#000000")).get_contrast_text(alpha)
            else:
                parsed = Color.parse(value)
            if parsed.a < 1.0:  # translucent: blend onto the theme background
                background = Color.parse(variables.get("background", "#000000"))
                parsed = background.blend(parsed.with_alpha(1.0), parsed.a)
            result = parsed.hex6
        except (ColorParseError, ValueError):
            result = None
    if len(_CACHE) > 4096:
        _CACHE.clear()
    _CACHE[key] = result
    return result


def style(app: App, fg: str | None = None, bg: str | None = None, *, bold: bool = False, dim: bool = False) -> Style:
    """A Rich style from theme variable names (unknown names leave that part unset)."""
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


def focus_now(widget) -> None:
    """Focus ``widget`` immediately. (``Widget.focus()`` defers it with ``call_later``, so
    keys typed right after — paste, fast typing, tmux send-keys — would still go to the
    previously focused widget and could trigger its bindings.)"""
    widget.screen.set_focus(widget)

"""The config's UI names checked whole before the TUI runs on it: ``theme`` must name a theme
(Textual's own, a shipped ``themes/*.toml`` or a user theme file) and every ``[keymap]`` key
a binding id some optui screen or widget has. Textual ignores an unknown keymap id and optui
used to fall back silently from an unknown theme (issue 30); here both are a
:class:`~optui.config_file.ConfigError` ``FILE:LINE: FIELD: problem``.

Only the UI knows these names (the bindings live on the widgets), so the check lives here and
runs when the TUI loads its campaign (in the loader's worker thread, off the first frame).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Mapping
from pathlib import Path

from optui.config_file import ConfigError, read_config_text

#: modules whose classes own optui's bindings (the app, the main screen, every screen and widget)
_BINDING_MODULES = ("optui.ui.app", "optui.ui.main_screen")
_BINDING_PACKAGES = ("optui.ui.widgets", "optui.ui.screens")


def known_theme_names() -> set[str]:
    """Every theme name the app can select: Textual's built-in themes and the theme files'."""
    from textual.theme import BUILTIN_THEMES

    from optui.ui.themes import load_themes

    themes, _errors = load_themes()
    return set(BUILTIN_THEMES) | {t.name for t in themes}


def known_binding_ids() -> set[str]:
    """Every binding id of optui's screens and widgets (and the Textual classes they extend):
    what a ``[keymap]`` key may name."""
    modules = [importlib.import_module(name) for name in _BINDING_MODULES]
    for package in _BINDING_PACKAGES:
        path = importlib.import_module(package).__path__
        modules += [importlib.import_module(f"{package}.{info.name}") for info in pkgutil.iter_modules(path)]
    ids: set[str] = set()
    for module in modules:
        for _name, cls in inspect.getmembers(module, inspect.isclass):
            for klass in cls.__mro__:
                for binding in vars(klass).get("BINDINGS", ()) or ():
                    binding_id = getattr(binding, "id", None)
                    if binding_id:
                        ids.add(binding_id)
    return ids


def check_ui_settings(theme: str | None, keymap: Mapping[str, str], path: Path | None,
                      theme_source: str = "theme") -> None:
    """Raise :class:`ConfigError` (one line per problem: ``FILE:LINE: theme: unknown theme
    'nope' (known: ...)``, ``FILE:LINE: keymap.ID: unknown binding id``) when ``theme`` or a
    key of ``keymap`` names nothing; ``path`` is the config file (None: no file),
    ``theme_source`` what set the theme (``theme``, or ``--theme`` from the command line)."""
    from optui.config import config_line

    problems: list[str] = []
    where = str(path) if path is not None else "optui.toml"
    text: list[str] = []  # the config's text, read once when a problem needs its line

    def line(loc: tuple[str, ...]) -> int | str:
        if not text:
            text.append(_read(path))
        return config_line(text[0], loc)

    if theme is not None:
        names = known_theme_names()
        if theme not in names:
            known = ", ".join(sorted(names))
            if theme_source == "theme":
                problems.append(f"{where}:{line(('theme',))}: theme: unknown theme {theme!r} (known: {known})")
            else:
                problems.append(f"{theme_source}: unknown theme {theme!r} (known: {known})")
    if keymap:
        ids = known_binding_ids()
        for key in keymap:
            if key not in ids:
                near = sorted(i for i in ids if i.split(".")[0] == key.split(".")[0])[:8]
                hint = f" (ids of {key.split('.')[0]!r}: {', '.join(near)})" if near else ""
                problems.append(f"{where}:{line(('keymap', key))}: keymap.{key}: unknown binding id{hint}")
    if problems:
        raise ConfigError("\n".join(problems))


def _read(path: Path | None) -> str:
    """The config's text, to name a problem's line (read only then, as load_config read it:
    bounded); ``""`` without a file or when it cannot be read any more."""
    if path is None:
        return ""
    try:
        return read_config_text(path)
    except ConfigError:
        return ""

"""Themes from TOML files: the shipped ``themes/`` directory, then the user's
``<config dir>/optui/themes/*.toml`` (user files override shipped ones by name).

A broken file never stops the app: it is reported (path + reason) and skipped; an unknown
theme name falls back to ``optui-dark`` with a warning.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

from textual.color import Color, ColorParseError
from textual.theme import Theme

DEFAULT_THEME = "optui-dark"
_COLOR_KEYS = {"primary", "secondary", "accent", "warning", "error", "success", "foreground", "background",
               "surface", "panel", "boost"}
_ALLOWED = _COLOR_KEYS | {"name", "dark", "luminosity_spread", "text_alpha", "variables"}


def builtin_theme_dir() -> Path:
    """The shipped themes: ``optui/themes`` in an installed wheel, else the repository's
    top-level ``themes/`` (editable installs)."""
    packaged = resources.files("optui").joinpath("themes")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "themes"


def user_theme_dir() -> Path:
    """``$XDG_CONFIG_HOME/optui/themes`` (platformdirs)."""
    from platformdirs import user_config_dir

    return Path(user_config_dir("optui", appauthor=False)) / "themes"


def load_theme_file(path: Path) -> Theme:
    """Parse one theme file; raises ValueError naming the file and the problem."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from exc
    unknown = set(data) - _ALLOWED
    if unknown:
        raise ValueError(f"{path}: unknown field(s) {', '.join(sorted(unknown))}")
    if "name" not in data or "primary" not in data:
        raise ValueError(f"{path}: a theme needs at least 'name' and 'primary'")
    for key in _COLOR_KEYS & data.keys():
        try:
            Color.parse(data[key])
        except ColorParseError as exc:
            raise ValueError(f"{path}: {key}: {exc}") from exc
    variables = data.get("variables", {})
    if not isinstance(variables, dict):
        raise ValueError(f"{path}: [variables] must be a table")
    for key, value in variables.items():
        try:
            Color.parse(str(value))
        except ColorParseError as exc:
            raise ValueError(f"{path}: variables.{key}: {exc}") from exc
    return Theme(**{**data, "variables": {k: str(v) for k, v in variables.items()}})


def load_themes(extra_dirs: list[Path] | None = None) -> tuple[list[Theme], list[str]]:
    """All themes (shipped, then user dirs) and the error messages of broken files."""
    themes: dict[str, Theme] = {}
    errors: list[str] = []
    for directory in [builtin_theme_dir(), user_theme_dir(), *(extra_dirs or [])]:
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.toml")):
            try:
                theme = load_theme_file(path)
            except ValueError as exc:
                errors.append(str(exc))
                continue
            themes[theme.name] = theme
    return list(themes.values()), errors

"""Themes from TOML files: the shipped ``themes/`` directory, then the user's
``<config dir>/optui/themes/*.toml`` (user files override shipped ones by name).

A user's file is checked against :class:`~optui.ui.theme_schema.ThemeFile` (pydantic, imported
only then); the shipped ones are checked by the tests. A broken file never stops the app: it
is reported (path + field + reason) and skipped; an unknown theme name falls back to
``optui-dark`` with a warning.
"""

from __future__ import annotations

from pathlib import Path

from textual.theme import Theme

from optui.config_file import ConfigError, load_toml, read_config_text

DEFAULT_THEME = "optui-dark"


def builtin_theme_dir() -> Path:
    """The shipped themes: ``optui/themes`` in an installed wheel, else the repository's
    top-level ``themes/`` (editable installs). Found from this file's path, not through
    ``importlib.resources`` (which, with its readers and zipfile, the first frame would
    import only for this: optui is never run from a zip)."""
    packaged = Path(__file__).resolve().parents[1] / "themes"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "themes"


def user_theme_dir() -> Path:
    """``$XDG_CONFIG_HOME/optui/themes`` (platformdirs)."""
    from platformdirs import user_config_dir

    return Path(user_config_dir("optui", appauthor=False)) / "themes"


def load_theme_file(path: Path, *, check: bool = True) -> Theme:
    """Parse one theme file (TOML: Textual ``Theme`` fields, ``[variables]``); ``check``: against
    :class:`~optui.ui.theme_schema.ThemeFile`. Raises ValueError naming the file, the field and
    the problem."""
    try:  # as optui.toml is read: bounded (a symlink to /dev/zero), UTF-8 checked, FILE:LINE errors
        data = load_toml(read_config_text(path), str(path))
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    if check:
        from optui.ui.theme_schema import check_theme

        data = check_theme(data, str(path))
    return Theme(**data)


def shipped_themes() -> list[Theme]:
    """Every shipped theme (``tests/unit/test_theme_schema.py`` checks each file)."""
    return [load_theme_file(path, check=False) for path in sorted(builtin_theme_dir().glob("*.toml"))]


def load_themes(extra_dirs: list[Path] | None = None, *, wanted: str | None = None) -> tuple[list[Theme], list[str]]:
    """All themes (shipped, then user dirs, a later file replacing an earlier one of its name)
    and the error messages of broken files. ``wanted`` (a theme's name) reads, of the shipped
    files, only ``<wanted>.toml`` (the first frame needs that one; the app reads the others
    after it), every file of the other directories (a theme's name is inside its file) and,
    where ``wanted`` is in none of them, everything."""
    themes: dict[str, Theme] = {}
    errors: list[str] = []
    shipped = builtin_theme_dir()
    for directory in [shipped, user_theme_dir(), *(extra_dirs or [])]:
        if not directory.is_dir():
            continue
        paths = sorted(directory.glob("*.toml"))
        if wanted is not None and directory == shipped:
            paths = [path for path in paths if path.stem == wanted]
        for path in paths:
            try:
                theme = load_theme_file(path, check=directory != shipped)
            except ValueError as exc:
                errors.append(str(exc))
                continue
            themes[theme.name] = theme
    if wanted is not None and wanted not in themes:
        return load_themes(extra_dirs)
    return list(themes.values()), errors

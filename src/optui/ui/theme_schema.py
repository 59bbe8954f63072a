"""The schema of a theme file (pydantic, like ``optui.toml``'s): the fields of Textual's
``Theme``, colours checked with Textual's own parser, no unknown field. Imported only for a
user's theme files (pydantic costs 140-260 ms to import on a loaded 2-core machine: the
shipped themes, checked against this schema by the tests, load without it, so the first
frame does not pay it)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from textual.color import Color, ColorParseError


def _colour(value: str) -> str:
    try:
        Color.parse(value)
    except ColorParseError as exc:
        raise ValueError(str(exc)) from None
    return value


#: a colour Textual can parse (``#1f3f5f``, ``rgb(…)``, ``ansi_red``, a name)
ColourText = Annotated[str, AfterValidator(_colour)]


class ThemeFile(BaseModel):
    """One theme file: ``name`` and ``primary`` required; the other colours optional;
    ``variables`` extra theme variables (each a colour: optui's ``gpu-mem-used``...)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1)
    primary: ColourText
    secondary: ColourText | None = None
    accent: ColourText | None = None
    warning: ColourText | None = None
    error: ColourText | None = None
    success: ColourText | None = None
    foreground: ColourText | None = None
    background: ColourText | None = None
    surface: ColourText | None = None
    panel: ColourText | None = None
    boost: ColourText | None = None
    dark: bool = True
    luminosity_spread: float = Field(0.15, ge=0, le=1)
    text_alpha: float = Field(0.95, ge=0, le=1)
    variables: dict[str, ColourText] = Field(default_factory=dict)


def check_theme(data: dict, source: str) -> dict:
    """``data`` (a parsed theme file) checked: the keyword arguments of ``Theme``. Raises
    ValueError ``SOURCE: FIELD: problem`` (every problem, ``; ``-separated)."""
    try:
        return ThemeFile.model_validate(data).model_dump(exclude_none=True)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(file)"
            message = "unknown field" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
            problems.append(f"{where}: {message}")
        raise ValueError(f"{source}: {'; '.join(problems)}") from None

"""Theme files checked by pydantic (ui/theme_schema.py, issue 35): every shipped theme passes
the schema the user's files are checked against; a user's broken file names the file, the
field and the problem (every problem at once); a good one loads."""

from __future__ import annotations

import tomllib

import pytest

from optui.ui.theme_schema import check_theme
from optui.ui.themes import builtin_theme_dir, load_theme_file, load_themes


@pytest.mark.parametrize("path", sorted(builtin_theme_dir().glob("*.toml")), ids=lambda p: p.stem)
def test_every_shipped_theme_passes_the_schema(path):
    data = tomllib.loads(path.read_text())
    assert check_theme(data, str(path))["name"] == path.stem
    assert load_theme_file(path).name == load_theme_file(path, check=False).name == path.stem


def test_a_broken_user_theme_names_each_field_and_problem(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('name = "mine"\nprimary = "not-a-colour"\ntext_alpha = 2.0\nshade = "#fff"\n'
                    '[variables]\ngpu-util = "#12345g"\nstate-ready = "#56b4e9"\n')
    with pytest.raises(ValueError) as err:
        load_theme_file(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ")
    for part in ("primary: ", "text_alpha: Input should be less than or equal to 1", "shade: unknown field",
                 "variables.gpu-util: "):
        assert part in message, message
    assert "state-ready" not in message


def test_a_theme_without_a_primary_colour_or_name_is_refused(tmp_path):
    path = tmp_path / "bare.toml"
    path.write_text('dark = true\n')
    with pytest.raises(ValueError, match=r"name: Field required; primary: Field required"):
        load_theme_file(path)


def test_a_good_user_theme_loads_beside_the_shipped_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    extra = tmp_path / "more"
    extra.mkdir()
    (extra / "ok.toml").write_text('name = "ok"\nprimary = "#336699"\ndark = false\n[variables]\ngpu-util = "ansi_green"\n')
    (extra / "bad.toml").write_text('name = "bad"\nprimary = 3\n')
    themes, errors = load_themes([extra])
    names = {t.name for t in themes}
    assert "ok" in names and "bad" not in names and "optui-dark" in names
    ok = next(t for t in themes if t.name == "ok")
    assert ok.dark is False and ok.variables == {"gpu-util": "ansi_green"}
    assert len(errors) == 1 and errors[0].startswith(f"{extra / 'bad.toml'}: primary: Input should be a valid string")

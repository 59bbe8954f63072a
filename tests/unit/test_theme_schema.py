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


def test_a_user_theme_file_is_read_as_a_config_is_bounded_with_its_line(tmp_path):
    """A theme file is read through config_file (read_config_text, load_toml): a symlink to
    /dev/zero is refused at the bound, never read whole; a syntax error names its line."""
    endless = tmp_path / "endless.toml"
    endless.symlink_to("/dev/zero")
    broken = tmp_path / "broken.toml"
    broken.write_text('name = "broken"\nprimary = "#336699\n')
    themes, errors = load_themes([tmp_path])
    assert not {"endless", "broken"} & {t.name for t in themes}
    assert any(e.startswith(f"{endless}: cannot read: larger than the limit of") for e in errors), errors
    assert any(e.startswith(f"{broken}:2: TOML syntax error") for e in errors), errors

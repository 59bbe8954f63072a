"""optui.toml validation: clear FILE:LINE: FIELD messages, defaults without a file."""

import subprocess
import sys

import pytest

from optui.config import ConfigError, load_config, parse_config_text

GOOD = """
theme = "optui-light"
[hosts.node1]
ssh = "node1"
[servers.qwen]
host = "node1"
url = "http://127.0.0.1:30000/"
argv = ["python", "-m", "sglang.launch_server", "--tp-size", "4"]
[servers.qwen.presets.big]
set = { "--max-running-requests" = "256" }
unset = ["--disable-cuda-graph"]
[benchmarks.c1]
server = "qwen"
argv = ["python", "-m", "sglang.bench_serving"]
[benchmarks.sweep]
server = "qwen"
builtin = { concurrency = [1, 2, 4], input_len = 64 }
"""


def test_good_config_parses():
    cfg = parse_config_text(GOOD)
    assert cfg.servers["qwen"].url == "http://127.0.0.1:30000"
    assert cfg.host("node1").source == "nvidia-smi" and cfg.host("local").source == "nvml"
    assert cfg.benchmarks["sweep"].builtin.concurrency == [1, 2, 4]
    assert cfg.host_names() == ["node1"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[servers.q]\nurl = 'http://a:1'\nargv = ['x']\npoll_interval_s = 'fast'\n",
         "optui.toml:4: servers.q.poll_interval_s: Input should be a valid number"),
        ("[servers.q]\nurl = 'ftp://x'\nargv = ['x']\n", "optui.toml:2: servers.q.url: must be an http(s) URL"),
        ("[servers.q]\nurl = 'http://a:1'\n", "optui.toml:1: servers.q: control = 'process' needs argv"),
        ("[servers.q]\nurl='http://a:1'\nargv=['x']\n\n[benchmarks.c]\nserver = 'zz'\nargv=['a']\n",
         "optui.toml:6: benchmarks.c.server: unknown server 'zz'"),
        ("[servers.q]\nurl='http://a:1'\nargv=['x']\nbogus = 1\n", "optui.toml:4: servers.q.bogus: unknown field"),
        ("[servers.q\nurl=1", "optui.toml:1: TOML syntax error"),
        ("[benchmarks.c]\nserver='q'\n", "benchmarks.c"),
    ],
)
def test_bad_config_names_line_and_field(text, expected):
    with pytest.raises(ConfigError) as err:
        parse_config_text(text)
    assert expected in str(err.value)


def test_no_config_means_local_host_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPTUI_CONFIG", raising=False)
    loaded = load_config()
    assert loaded.path is None and loaded.config.servers == {} and loaded.config.host_names() == ["local"]


def test_journal_default_beside_config(tmp_path):
    path = tmp_path / "optui.toml"
    path.write_text("")
    assert load_config(path).journal_path == tmp_path / ".optui" / "optui.db"


def test_cli_bad_config_exits_2_without_traceback(tmp_path):
    bad = tmp_path / "optui.toml"
    bad.write_text("[servers.q]\nurl = 'http://a:1'\nargv = ['x']\nstop_timeout_s = -1\n")
    proc = subprocess.run([sys.executable, "-m", "optui", "--config", str(bad), "status"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"{bad}:4: servers.q.stop_timeout_s" in proc.stderr
    assert "Traceback" not in proc.stderr


SERVER = '[servers.q]\nurl = "http://127.0.0.1:1"\nargv = ["x"]\n'
BENCH = SERVER + '[benchmarks.b]\nserver = "q"\n'


@pytest.mark.parametrize(
    "text, expected",
    [
        # inf / nan timeouts: a restart or a stop would wait forever
        (SERVER + "ready_timeout_s = inf\n", "optui.toml:4: servers.q.ready_timeout_s: Input should be a finite number (got inf)"),
        (SERVER + "stop_timeout_s = nan\n", "optui.toml:4: servers.q.stop_timeout_s: Input should be a finite number (got nan)"),
        (SERVER + "stop_timeout_s = 1e9\n", "optui.toml:4: servers.q.stop_timeout_s: Input should be less than or equal to 3600"),
        (BENCH + "argv = ['y']\nsilent_s = inf\n", "optui.toml:7: benchmarks.b.silent_s: Input should be a finite number"),
        # booleans and strings are not numbers
        ("refresh_s = true\n", "optui.toml:1: refresh_s: Input should be a valid number (got True)"),
        (SERVER + 'poll_interval_s = "1"\n', "optui.toml:4: servers.q.poll_interval_s: Input should be a valid number (got '1')"),
        ('log_max_lines = "1000"\n', "optui.toml:1: log_max_lines: Input should be a valid integer (got '1000')"),
        ("[hosts.h]\ndemo_gpus = true\n", "optui.toml:2: hosts.h.demo_gpus: Input should be a valid integer (got True)"),
        (SERVER + 'autostart = "yes"\n', "optui.toml:4: servers.q.autostart: Input should be a valid boolean (got 'yes')"),
        # ranges of the built-in generator: negative concurrency, a prompt that freezes the window
        (BENCH + "builtin = { concurrency = [4, -1] }\n",
         "optui.toml:6: benchmarks.b.builtin.concurrency.1: Input should be greater than or equal to 1 (got -1)"),
        (BENCH + "builtin = { concurrency = true }\n", "optui.toml:6: benchmarks.b.builtin.concurrency"),
        (BENCH + "builtin = { input_len = 3000000 }\n",
         "optui.toml:6: benchmarks.b.builtin.input_len: Input should be less than or equal to 262144 (got 3000000)"),
        (BENCH + "builtin = { request_rate = nan }\n", "optui.toml:6: benchmarks.b.builtin.request_rate: Input should be greater than 0"),
        (BENCH + "argv = ['y']\nsweep = { request_rate = [1, nan] }\n", "optui.toml:7: benchmarks.b.sweep.request_rate.1: Input should be greater than 0"),
        (BENCH + "argv = ['y']\nsweep = { concurrency = [1, 100000] }\n", "optui.toml:7: benchmarks.b.sweep.concurrency.1: Input should be less than or equal to 10000"),
        ("[todo]\nmax_in_progress = -1\n", "optui.toml:2: todo.max_in_progress: Input should be greater than or equal to 0"),
        # names become file names under .optui/ (pidfile, lock, log)
        ('[servers."../../x"]\nurl = "http://127.0.0.1:1"\nargv = ["x"]\n',
         "optui.toml:1: servers.../../x: bad name '../../x': use at most 64 letters, digits, '-', '_' and '.' (not first)"),
        ('[hosts.".hidden"]\n', "optui.toml:1: hosts..hidden: bad name '.hidden'"),
        (SERVER + '[benchmarks."a/b"]\nserver = "q"\nargv = ["y"]\n', "optui.toml:4: benchmarks.a/b: bad name 'a/b'"),
        ('[servers."q\\nr"]\nurl = "http://127.0.0.1:1"\nargv = ["x"]\n', "bad name 'q\\nr'"),
    ],
)
def test_numbers_are_strict_finite_and_bounded_and_names_are_file_safe(text, expected):
    with pytest.raises(ConfigError) as info:
        parse_config_text(text)
    assert expected in str(info.value)


def test_inf_request_rate_and_every_default_are_still_valid():
    cfg = parse_config_text(BENCH + "builtin = { request_rate = inf, concurrency = 8 }\n"
                            '[servers."llama-3.1_8b"]\nurl = "http://127.0.0.1:2"\nargv = ["x"]\nready_timeout_s = 600\n')
    assert cfg.benchmarks["b"].builtin.request_rate == float("inf") and cfg.benchmarks["b"].builtin.concurrency == [8]
    assert cfg.servers["llama-3.1_8b"].ready_timeout_s == 600.0
    parse_config_text(GOOD)


@pytest.mark.parametrize(
    "builtin, expected",
    [
        ('prefix = "shared"', 'optui.toml:6: benchmarks.b.builtin.prefix: must be "none", { shared_tokens = N } or '
                              '{ dataset = "FILE" } (got \'shared\')'),
        ("prefix = { shared = 3 }", 'optui.toml:6: benchmarks.b.builtin.prefix: must be "none", { shared_tokens = N }'),
        ("prefix = { shared_tokens = 0 }",
         "optui.toml:6: benchmarks.b.builtin.prefix.shared_tokens: Input should be greater than or equal to 1 (got 0)"),
        ("input_len = 64, prefix = { shared_tokens = 64 }",
         "optui.toml:6: benchmarks.b.builtin: prefix.shared_tokens (64) must be less than input_len (64)"),
        ('prefix = { dataset = "" }', "optui.toml:6: benchmarks.b.builtin.prefix.dataset: String should have at least 1 character"),
        ("seed = -1", "optui.toml:6: benchmarks.b.builtin.seed: Input should be greater than or equal to 0 (got -1)"),
        ('seed = "7"', "optui.toml:6: benchmarks.b.builtin.seed: Input should be a valid integer (got '7')"),
    ],
)
def test_builtin_prefix_and_seed_errors_name_the_field(builtin, expected):
    with pytest.raises(ConfigError) as info:
        parse_config_text(BENCH + f"builtin = {{ {builtin} }}\n")
    assert expected in str(info.value) and len(str(info.value).splitlines()) == 1


def test_builtin_prefix_forms_and_the_fresh_seed_default():
    from optui.config import DatasetPrompts, SharedPrefix

    def builtin(body: str):
        return parse_config_text(BENCH + f"builtin = {{ {body} }}\n").benchmarks["b"].builtin

    plain = builtin("input_len = 32")
    assert plain.prefix == "none" and plain.seed is None  # fresh prompts every run unless a seed is given
    assert builtin("prefix = { shared_tokens = 16 }, seed = 9").prefix == SharedPrefix(shared_tokens=16)
    assert builtin('prefix = { dataset = "p.jsonl" }').prefix == DatasetPrompts(dataset="p.jsonl")


def test_a_bad_server_name_creates_nothing_outside_the_state_dir(tmp_path):
    camp = tmp_path / "a" / "b"
    camp.mkdir(parents=True)
    (camp / "optui.toml").write_text('[servers."../../x"]\nurl = "http://127.0.0.1:1"\nargv = ["sleep", "60"]\n')
    proc = subprocess.run([sys.executable, "-m", "optui", "-c", str(camp / "optui.toml"), "status", "--wait", "0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "bad name '../../x'" in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b", "optui.toml"]


@pytest.mark.parametrize(
    "text, expected",
    [
        # tomllib names no position for these (Python 3.11: "(at end of document)")
        ('[servers.q]\nurl = "http://127.0.0.1:1"\nargv = ["x",\n', "optui2.toml:3: TOML syntax error (column 13): Invalid value"),
        ('theme = "x"\nname = "unterminated\n\n', "optui2.toml:2: TOML syntax error (column 21): Illegal character"),
        ("a = 1\na = 2\n", "optui2.toml:2: TOML syntax error (column 6): Cannot overwrite a value"),
        # tomllib's own position, said the same way
        ("[servers.q\nurl=1", "optui2.toml:1: TOML syntax error (column 11): Expected ']'"),
    ],
)
def test_cli_toml_syntax_error_names_line_and_column(tmp_path, text, expected):
    # issue 20: `optui2.toml:?: TOML syntax error` named no line
    bad = tmp_path / "optui2.toml"
    bad.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "optui", "--config", str(bad), "status", "--json"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2
    assert expected.replace("optui2.toml", str(bad)) in proc.stderr, proc.stderr
    assert "?" not in proc.stderr.split("TOML")[0] and "Traceback" not in proc.stderr


def test_readme_config_error_example_is_what_optui_says():
    # issue 20: the README's example named `servers.qwen.port`, a field that does not exist
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    example = re.search(r"A bad file never gives a traceback: `(optui\.toml:\d+: servers\.qwen\.(\w+): [^`]*\(got '([^']+)'\))`",
                        readme.replace("\n", " "))
    assert example, "README lost its config-error example"
    message, field, bad_value = example.groups()
    block = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    assert re.search(rf"^{field} = ", block, re.M), f"README's example config has no {field}"
    broken = re.sub(rf"^{field} = \S+", f'{field} = "{bad_value}"', block, count=1, flags=re.M)
    with pytest.raises(ConfigError) as err:
        parse_config_text(broken)
    assert str(err.value) == message


def test_a_flag_both_allowed_and_forbidden_to_an_agent_is_refused_with_its_line():
    """Issue 30: accepted silently before (the forbidden one won, or not, by the code's order)."""
    text = '[agent]\nallowed_flags = ["--tp-size", "--max-running-requests"]\nforbidden_flags = ["--mem-fraction-static", "tp_size"]\n'
    with pytest.raises(ConfigError) as err:
        parse_config_text(text)
    assert str(err.value) == ("optui.toml:3: agent.forbidden_flags: tp_size also in allowed_flags: a flag is either "
                              "allowed or forbidden to an agent, not both")
    parse_config_text('[agent]\nallowed_flags = ["--tp-size"]\nforbidden_flags = ["--mem-fraction-static"]\n')


def test_an_unknown_theme_or_keymap_id_is_refused_with_file_and_line(tmp_path):
    from optui.ui.config_check import check_ui_settings, known_binding_ids, known_theme_names

    path = tmp_path / "optui.toml"
    path.write_text('theme = "nope"\n\n[keymap]\n"app.zoom" = "y"\n"app.zoomm" = "z"\n')
    config = load_config(path).config  # the model alone accepts both (it knows no UI names)
    with pytest.raises(ConfigError) as err:
        check_ui_settings(config.theme, config.keymap, path)
    theme_line, keymap_line = str(err.value).splitlines()
    assert theme_line.startswith(f"{path}:1: theme: unknown theme 'nope' (known: ")
    assert "optui-dark" in theme_line and "textual-dark" in theme_line
    assert keymap_line.startswith(f"{path}:5: keymap.app.zoomm: unknown binding id (ids of 'app': ")
    with pytest.raises(ConfigError, match=r"^--theme: unknown theme 'nah'"):
        check_ui_settings("nah", {}, path, "--theme")
    # what the README and the keymap test use stays valid
    assert {"app.zoom", "todo.add", "input.cursor_left"} <= known_binding_ids()
    assert {"optui-dark", "optui-light", "textual-dark"} <= known_theme_names()
    check_ui_settings("optui-light", {"app.zoom": "y", "todo.add": "A"}, path)


def test_the_tui_refuses_an_unknown_theme_with_the_line_and_exit_2(tmp_path):
    """The real `optui` in a pseudo-terminal: the message after the screen closes, exit 2."""
    from tests.helpers.demo import run_in_pty_until_exit

    (tmp_path / "optui.toml").write_text('theme = "nope"\n[hosts.local]\ngpu_source = "none"\n')
    code, text = run_in_pty_until_exit([sys.executable, "-m", "optui"], cwd=tmp_path)
    assert code == 2
    assert f"{tmp_path / 'optui.toml'}:1: theme: unknown theme 'nope'" in text
    assert "Traceback" not in text

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

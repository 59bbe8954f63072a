"""``optui journal export --mlflow URI``: one MLflow run per experiment, read back through
MLflow's own client from a real tracking server (``mlflow server``, SQLite backend) started on
127.0.0.1; a second export adds nothing; the pure record (tags, params, per-workload metrics,
verdicts with evidence, artifacts) checked on its own, the failed and the noisy case included."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from optui.adapters.journal import Journal
from optui.config import load_config
from optui.core.journal.tracking_record import CAMPAIGN_TAG, EXPERIMENT_TAG, flag_params, tracked_run, tracking_key
from optui.session.journal.export import load_experiments, tracked_runs
from tests.helpers.campaign import WL, CampaignWriter, flags, result, standard_campaign
from tests.helpers.demo import free_port, subprocess_env
from tests.helpers.mlflow_server import mlflow_server

CONFIG = '''
[hosts.local]
gpu_source = "none"

[servers.qwen]
url = "http://127.0.0.1:30000"
kind = "sglang"
argv = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"]
'''
C16 = "random 256_96 x64 c16"
C1 = "random 256_96 x64 c1"


@pytest.fixture
def campaign(tmp_path):
    """standard_campaign (baseline, better, OOM, worse, never measured) + a second workload
    (c1) measured by the baseline and the big batch."""
    cfg = tmp_path / "qwen-tuning" / "optui.toml"
    cfg.parent.mkdir()
    cfg.write_text(CONFIG)
    loaded = load_config(cfg)
    j = Journal(loaded.journal_path)
    ids = standard_campaign(j)
    w = CampaignWriter(j)
    w.t += 10_000
    c1 = dataclasses.replace(WL, max_concurrency=1)
    w.bench(ids["base"], *(result(100.0 + i, 20.0, wl=c1) for i in range(3)), name="c1")
    w.bench(ids["big"], *(result(101.0 + i, 20.5, wl=c1) for i in range(3)), name="c1")
    yield loaded, j, ids
    j.close()


def runs_by_id(loaded, j):
    return {r.tags[EXPERIMENT_TAG]: r for r in tracked_runs(j, loaded)}


def test_each_experiment_is_one_record_with_flags_metrics_per_workload_and_verdicts(campaign):
    loaded, j, ids = campaign
    runs = runs_by_id(loaded, j)
    assert sorted(runs) == sorted(ids.values())
    big = runs[ids["big"]]
    assert big.tags[CAMPAIGN_TAG] == "qwen-tuning"
    assert big.tags["optui.server"] == "qwen" and big.tags["optui.engine"] == "sglang"
    assert big.tags["optui.engine_version"] == "0.5.23" and big.tags["optui.version"]
    assert big.params["--max-running-requests"] == "64" and big.params["--tp-size"] == "2"
    assert big.params["argv"].startswith('["python", "-m", "sglang.launch_server"')
    # one metric family per workload, the workload in each name
    assert big.metrics[f"{C16}/out_tok_s"] == 1295.0
    assert big.metrics[f"{C16}/ttft_p50_ms"] == 90.5 and big.metrics[f"{C16}/ttft_p99_ms"] == 181.0
    assert big.metrics[f"{C1}/out_tok_s"] == 102.0
    assert big.metrics[f"{C16}/out_tok_s_delta_pct"] == pytest.approx(100 * (1295 - 1005) / 1005)
    # the verdict with its evidence, overall and per workload: better on c16, the noise on c1
    assert big.tags["optui.verdict"] == "better"
    assert big.tags[f"optui.verdict/{C16}"] == "better" and "n=3 vs 3" in big.tags[f"optui.evidence/{C16}"]
    assert big.tags[f"optui.verdict/{C1}"] == "same"  # +1 % inside the noise floor: never better
    assert runs[ids["chunk"]].tags["optui.verdict"] == "worse"
    assert set(big.artifacts) == {"argv.json", "findings.md", "server_log_excerpt.txt"}
    assert big.artifacts["findings.md"].startswith("# Findings")
    assert big.artifacts["server_log_excerpt.txt"] == "loading_weights: 2.0 s\ncuda_graph: 20.0 s\nready: 31.5 s\nready: 31.5 s\n"
    assert big.status == "FINISHED" and big.end_ms is not None


def test_a_failed_experiment_has_its_crash_and_log_excerpt_and_no_metrics(campaign):
    loaded, j, ids = campaign
    oom = runs_by_id(loaded, j)[ids["oom"]]
    assert oom.status == "FAILED" and oom.tags["optui.outcome"] == "failed:oom"
    assert not [k for k in oom.metrics if "/" in k]
    assert "CUDA out of memory" in oom.artifacts["server_log_excerpt.txt"]
    assert oom.params["--mem-fraction-static"] == "0.99"


def test_a_never_measured_experiment_is_untested():
    from optui.core.journal.experiments import Experiment

    x = Experiment(id="exp-0009", server="s", started_ts=1.0, actor="cli", reason="", argv=("vllm", "serve", "m", "--x"),
                   prev_argv=(), diff_prev=())
    run = tracked_run(x, campaign="c", engine=None, optui_version="0")
    assert run.tags["optui.verdict"] == "untested" and run.tags["optui.engine"] == "unknown"
    assert run.params == {"positional 0": "m", "--x": "true", "argv": '["vllm", "serve", "m", "--x"]'}
    assert run.status == "RUNNING" and run.metrics == {}


def test_keys_keep_only_what_mlflow_accepts():
    assert tracking_key("random 128/64 x32 c4") == "random 128/64 x32 c4"
    assert tracking_key("sharegpt:v2 (c=4)") == "sharegpt_v2 _c_4_"
    assert flag_params(("llama-server", "-c", "2048", "--n-gpu-layers=99")) == {"-c": "2048", "--n-gpu-layers": "99"}


def test_a_missing_client_says_how_to_install_it(monkeypatch):
    from optui.adapters import mlflow_export

    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow raises ImportError
    monkeypatch.setitem(sys.modules, "mlflow.exceptions", None)
    with pytest.raises(mlflow_export.TrackingError, match=r"pip install 'optui\[mlflow\]'"):
        mlflow_export.export_runs("http://127.0.0.1:1", "c", [])


def optui_cli(cwd, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optui", *args], cwd=cwd, env=subprocess_env(), capture_output=True,
                          text=True, timeout=timeout)


def test_an_unreachable_tracking_server_is_a_clear_error(campaign):
    loaded, j, _ = campaign
    port = free_port()
    done = optui_cli(loaded.path.parent, "journal", "export", "--mlflow", f"http://127.0.0.1:{port}")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"optui: error: MLflow export: http://127.0.0.1:{port}")
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.fixture(scope="module")
def tracking_uri(tmp_path_factory):
    """One real tracking server for the module's tests (each campaign is its own experiment)."""
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as uri:
        yield uri


@pytest.mark.timeout(420)  # the server's start on a loaded 2-core machine is counted in the first test
def test_export_to_a_real_tracking_server_is_read_back_and_a_second_export_adds_nothing(campaign, tmp_path, tracking_uri):
    from mlflow.tracking import MlflowClient

    loaded, j, ids = campaign
    uri = tracking_uri
    if True:
        first = optui_cli(loaded.path.parent, "journal", "export", "--mlflow", uri)
        assert first.returncode == 0, first.stderr
        assert first.stdout.splitlines() == [f"MLflow {uri}: experiment 'optui/qwen-tuning' (id {first.stdout.split('(id ')[1].split(')')[0]}): "
                                             "5 runs created, 0 updated, 0 unchanged"]  # nothing of MLflow's own prints
        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name("optui/qwen-tuning")
        runs = {r.data.tags[EXPERIMENT_TAG]: r for r in client.search_runs([experiment.experiment_id])}
        assert sorted(runs) == sorted(ids.values())
        big = runs[ids["big"]]
        assert big.data.params["--max-running-requests"] == "64"
        assert big.data.metrics[f"{C16}/out_tok_s"] == 1295.0 and big.data.metrics[f"{C1}/out_tok_s"] == 102.0
        assert big.data.tags["optui.verdict"] == "better" and big.data.tags["optui.campaign"] == "qwen-tuning"
        assert big.info.status == "FINISHED" and runs[ids["oom"]].info.status == "FAILED"
        assert {a.path for a in client.list_artifacts(big.info.run_id)} == {"argv.json", "findings.md", "server_log_excerpt.txt"}
        excerpt = client.download_artifacts(runs[ids["oom"]].info.run_id, "server_log_excerpt.txt", str(tmp_path))
        assert "CUDA out of memory" in open(excerpt).read()

        again = optui_cli(loaded.path.parent, "journal", "export", "--mlflow", uri)
        assert again.returncode == 0, again.stderr
        assert again.stdout.endswith("0 runs created, 0 updated, 5 unchanged\n")
        rerun = {r.data.tags[EXPERIMENT_TAG]: r.info.run_id for r in client.search_runs([experiment.experiment_id])}
        assert rerun == {k: r.info.run_id for k, r in runs.items()}  # the same runs, none added
        assert len(client.get_metric_history(big.info.run_id, f"{C16}/out_tok_s")) == 1

        # the never-measured experiment gets its runs: that run alone is updated
        w = CampaignWriter(j)
        w.t += 20_000
        w.argv = flags(max_running_requests=64, disable_radix_cache=True)
        w.bench(ids["radix"], *(result(1200.0 + i) for i in range(3)))
        assert load_experiments(j)[-1].workloads
        third = optui_cli(loaded.path.parent, "journal", "export", "--mlflow", uri)
        # the findings report (the whole campaign's) is sent again to every run: counted apart
        assert third.stdout.endswith("0 runs created, 1 updated, 4 unchanged; findings report refreshed on 5\n"), third.stderr
        radix = client.get_run(runs[ids["radix"]].info.run_id)
        assert radix.data.metrics[f"{C16}/out_tok_s"] == 1201.0
        assert len(client.search_runs([experiment.experiment_id])) == 5


@pytest.mark.timeout(420)
async def test_export_config_logs_each_experiment_of_this_session_as_it_ends(campaign, tmp_path, tracking_uri):
    from mlflow.tracking import MlflowClient

    from optui.session.journal.tracking_export import TrackingExporter

    loaded, j, ids = campaign
    cfg = tmp_path / "live-export" / "optui.toml"  # a campaign of its own name (its own MLflow experiment)
    cfg.parent.mkdir()
    cfg.write_text(f'journal = "{loaded.journal_path}"\n' + CONFIG + f'\n[export]\nmlflow = "{tracking_uri}"\n')
    loaded = load_config(cfg)
    assert loaded.config.export.mlflow == tracking_uri
    errors: list[str] = []
    exporter = TrackingExporter(loaded.config.export.mlflow, loaded, errors.append)
    # the benchmarks were this session's ("tui"); the OOM's server.failed was written by "optui"
    exporter.events(j.events(limit=None), "tui")
    await exporter.idle()
    assert errors == []
    client = MlflowClient(tracking_uri=tracking_uri)
    experiment = client.get_experiment_by_name("optui/live-export")
    runs = {r.data.tags[EXPERIMENT_TAG]: r for r in client.search_runs([experiment.experiment_id])}
    assert ids["base"] in runs and ids["big"] in runs and ids["chunk"] in runs and ids["oom"] not in runs
    assert runs[ids["big"]].data.metrics[f"{C16}/out_tok_s"] == 1295.0

    broken = TrackingExporter(f"http://127.0.0.1:{free_port()}", loaded, errors.append)
    broken.events(j.events(limit=None), "tui")
    await broken.idle()
    assert len(errors) == 1 and errors[0].startswith("MLflow export of exp-0001, exp-0002, exp-0004 to http://127.0.0.1:")


def test_export_config_is_checked(tmp_path):
    from optui.config import ConfigError

    cfg = tmp_path / "optui.toml"
    cfg.write_text('[export]\nmlflow = "not a uri"\n')
    with pytest.raises(ConfigError, match="export.mlflow"):
        load_config(cfg)

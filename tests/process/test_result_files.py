"""Reading the result file a client wrote during a run (optui.adapters.result_files)."""

from __future__ import annotations

import os
from pathlib import Path

from optui.adapters.result_files import mark, read_new
from optui.core.bench.cmd import result_file_spec

FIXTURES = Path(__file__).parents[1] / "fixtures" / "bench"
SGLANG_LINE = '{"backend": "sglang", "completed": %d, "total_throughput": 1.5, "mean_e2e_latency_ms": 1, "request_rate": Infinity}\n'
VLLM = ["vllm", "bench", "serve", "--save-result"]


def test_appended_jsonl_reads_only_the_new_lines(tmp_path):
    spec = result_file_spec(["python", "-m", "sglang.bench_serving", "--output-file", "r.jsonl"])
    (tmp_path / "r.jsonl").write_text(SGLANG_LINE % 1)
    before = mark(spec, str(tmp_path))
    with open(tmp_path / "r.jsonl", "a") as f:
        f.write(SGLANG_LINE % 2 + SGLANG_LINE % 3)
    read = read_new(spec, str(tmp_path), before)
    assert [r.completed for r in read.results] == [2, 3] and read.path.endswith("r.jsonl") and read.error is None


def test_untouched_or_missing_file_is_reported_not_read(tmp_path):
    spec = result_file_spec(["python", "-m", "sglang.bench_serving", "--output-file", "r.jsonl"])
    read = read_new(spec, str(tmp_path), mark(spec, str(tmp_path)))
    assert read.results == [] and "wrote no result file" in read.error
    (tmp_path / "r.jsonl").write_text(SGLANG_LINE % 1)
    read = read_new(spec, str(tmp_path), mark(spec, str(tmp_path)))
    assert read.results == [] and "not written by this run" in read.error


def test_rewritten_vllm_file_is_read_whole(tmp_path):
    spec = result_file_spec([*VLLM, "--result-filename", "x.json"])
    assert not spec.append
    (tmp_path / "x.json").write_text('{"completed": 1, "failed": 0, "total_token_throughput": 1}')
    before = mark(spec, str(tmp_path))
    text = (FIXTURES / "vllm_save_result.json").read_text()  # bigger than the old file
    (tmp_path / "x.json").write_text(text)
    os.utime(tmp_path / "x.json", ns=(before.mtime_ns + 10**9, before.mtime_ns + 10**9))
    read = read_new(spec, str(tmp_path), before)
    assert len(read.results) == 1 and read.results[0].completed == 998
    appending = result_file_spec([*VLLM, "--append-result", "--result-filename", "x.json"])
    assert appending.append


def test_newest_new_json_in_the_result_dir(tmp_path):
    spec = result_file_spec([*VLLM, "--result-dir", "out"])
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.json").write_text("{}")
    before = mark(spec, str(tmp_path))
    (out / "new.pytorch.json").write_text("[]")  # vLLM's sibling file is not a result
    (out / "new.json").write_text((FIXTURES / "vllm_save_result.json").read_text())
    read = read_new(spec, str(tmp_path), before)
    assert read.path.endswith("new.json") and read.results[0].tool == "vllm"
    again = read_new(spec, str(tmp_path), mark(spec, str(tmp_path)))
    assert again.results == [] and "no new *.json" in again.error


def test_malformed_file_gives_an_error_naming_it(tmp_path):
    spec = result_file_spec(["python", "-m", "sglang.bench_serving", "--output-file", "r.jsonl"])
    before = mark(spec, str(tmp_path))
    (tmp_path / "r.jsonl").write_text('{"completed": \n')
    read = read_new(spec, str(tmp_path), before)
    assert read.results == [] and "r.jsonl:1: invalid JSON" in read.error


async def test_a_vllm_result_dir_on_an_ssh_host_is_scanned_there(tmp_path):
    """The run's newest new *.json in the remote --result-dir (it used to be "not scanned":
    the rounded stdout summary was used instead of the file)."""
    from optui.adapters.result_files import mark_remote, read_new_remote
    from optui.adapters.shell_ssh import SshShell
    from tests.helpers.sshd import running_sshd, ssh_host

    spec = result_file_spec([*VLLM, "--result-dir", "out dir"])
    out = tmp_path / "out dir"
    with running_sshd(tmp_path / "sshd") as sshd:
        host = ssh_host(sshd)
        shell = SshShell("rack1", host)
        try:
            before = await mark_remote(shell, spec, str(tmp_path))
            assert before.seen == {}  # no directory yet
            out.mkdir()
            (out / "old.json").write_text("{}")
            before = await mark_remote(shell, spec, str(tmp_path))
            assert set(before.seen) == {"old.json"}
            (out / "new.pytorch.json").write_text("[]")  # vLLM's sibling file is not a result
            (out / "new.json").write_text((FIXTURES / "vllm_save_result.json").read_text())
            read = await read_new_remote(shell, spec, str(tmp_path), before)
            assert read.error is None and read.path == f"rack1:{out}/new.json" and read.results[0].tool == "vllm"
            again = await read_new_remote(shell, spec, str(tmp_path), await mark_remote(shell, spec, str(tmp_path)))
            assert again.results == [] and "no new *.json" in again.error
        finally:
            await host.close()

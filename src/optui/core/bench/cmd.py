"""Benchmark command lines: which tool an argv runs, which result file it will write, the
workload its flags describe, and the argv of one sweep point.

Tools (``servers_and_bench.md`` sections 3.1, 3.2):

- SGLang: ``python -m sglang.bench_serving`` (0.5.2; a deprecated shim in 0.5.23),
  ``python -m sglang.benchmark.serving`` (0.5.23), ``python .../sglang/bench_serving.py``;
  result file ``--output-file PATH`` (JSONL, appended, one line per run).
- vLLM: ``vllm bench serve`` (0.33), ``python benchmarks/benchmark_serving.py`` (early
  2025); result file with ``--save-result``: ``--result-dir`` (default ``.``) /
  ``--result-filename`` (default ``{label}-{rate}qps[-concurrencyN]-{model}-{date}.json``,
  so without it the newest ``*.json`` written during the run is the result).
- optui's demo client ``python -m optui.demo.bench_client`` prints SGLang's format.

Flags are read with :class:`~optui.core.flags.argv.Flags` (``--x v`` and ``--x=v``; the last
occurrence wins like argparse). argparse also accepts unambiguous prefixes
(``--random-input 1024``), so :func:`workload_args` does too for the names it reads.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from optui.core.bench.canon import as_float, as_int
from optui.core.bench.result import BenchResult, Workload
from optui.core.flags.argv import Flags

# flag -> key of the parsed Namespace / saved-result objects (what bench.canon.finish reads)
_WORKLOAD_FLAGS = {
    "--num-prompts": "num_prompts",
    "--dataset-name": "dataset_name",
    "--random-input-len": "random_input_len",
    "--random-output-len": "random_output_len",
    "--input-len": "input_len",
    "--output-len": "output_len",
    "--max-concurrency": "max_concurrency",
    "--request-rate": "request_rate",
}
_SGLANG_RE = re.compile(r"sglang[./](?:bench_serving|benchmark[./]serving)|optui\.demo\.bench_client")


def detect_tool(argv: list[str] | tuple[str, ...]) -> str:
    """"sglang", "vllm" or "unknown" for a benchmark argv (see module doc)."""
    tokens = [str(t) for t in argv]
    for i, token in enumerate(tokens):
        if _SGLANG_RE.search(token) or token.endswith("bench_serving.py") and "sglang" in token:
            return "sglang"
        if token.endswith("benchmark_serving.py") or "vllm/benchmarks/serve" in token:
            return "vllm"
        name = token.rsplit("/", 1)[-1]
        if name == "vllm" and tokens[i + 1 : i + 3] == ["bench", "serve"]:
            return "vllm"
        if token == "vllm.entrypoints.cli.main" and tokens[i + 1 : i + 3] == ["bench", "serve"]:
            return "vllm"
    if any(t.endswith("bench_serving.py") for t in tokens):
        return "sglang"
    return "unknown"


@dataclass(frozen=True, slots=True)
class ResultFileSpec:
    """Where a command writes its own result file.

    ``kind`` "sglang-jsonl" or "vllm-json"; ``path`` the exact file (relative paths are
    relative to the command's working directory) or None when only ``directory`` is known
    (vLLM without ``--result-filename``: the newest ``*.json`` written there during the run);
    ``append`` True when each run adds to the file (SGLang always, vLLM with
    ``--append-result``) rather than rewriting it.
    """

    kind: str
    path: str | None
    directory: str = "."
    append: bool = False


def result_file_spec(argv: list[str] | tuple[str, ...], tool: str = "auto") -> ResultFileSpec | None:
    """The result file ``argv`` asks its tool to write, or None (no such flag, or a tool
    optui does not know). SGLang: ``--output-file``; vLLM: ``--save-result``. ``tool``
    "sglang"/"vllm" overrides :func:`detect_tool` (a wrapper script around the client)."""
    if tool not in ("sglang", "vllm"):
        tool = detect_tool(argv)
    flags = Flags.parse(argv, booleans=("--save-result", "--append-result", "--save-detailed"))
    if tool == "sglang":
        value = _last(flags, "--output-file")
        return ResultFileSpec("sglang-jsonl", value, append=True) if value else None
    if tool == "vllm" and flags.has("--save-result"):
        directory = _last(flags, "--result-dir") or "."
        filename = _last(flags, "--result-filename")
        append = flags.has("--append-result")
        if filename:
            path = filename if filename.startswith("/") else f"{directory.rstrip('/')}/{filename}"
            return ResultFileSpec("vllm-json", path, directory, append)
        return ResultFileSpec("vllm-json", None, directory, append)
    return None


def _last(flags: Flags, name: str) -> str | None:
    values = flags.get(name)
    return values[-1] if values else None


def workload_args(argv: list[str] | tuple[str, ...]) -> dict:
    """The workload-describing flags of ``argv`` as a Namespace-like dict (``num_prompts``,
    ``dataset_name``, ``random_input_len``, ``random_output_len``, ``input_len``,
    ``output_len``, ``max_concurrency``, ``request_rate``), typed; flags that are absent
    are absent (tool defaults differ between versions, so none are invented)."""
    out: dict = {}
    mapping = Flags.parse(argv).as_mapping()
    for name, values in mapping.items():
        if not name.startswith("--") or not values:
            continue
        key = _WORKLOAD_FLAGS.get(name) or _prefix_match(name)
        if key is None:
            continue
        value = values[-1]
        if key == "dataset_name":
            out[key] = value
        elif key == "request_rate":
            number = as_float(value)
            if number is not None:
                out[key] = number
        else:
            number = as_int(value)
            if number is not None:
                out[key] = number
    return out


def _prefix_match(name: str) -> str | None:
    """argparse's abbreviation rule for the flags we read: a unique prefix of one of them."""
    if len(name) < 6:
        return None
    hits = [key for flag, key in _WORKLOAD_FLAGS.items() if flag.startswith(name)]
    return hits[0] if len(hits) == 1 else None


def point_argv(argv: list[str] | tuple[str, ...], *, concurrency: int | None = None,
               request_rate: float | None = None) -> list[str]:
    """``argv`` with ``--max-concurrency`` and/or ``--request-rate`` set (replacing an
    existing value in place; both tools use these names). ``inf`` rates print as "inf"."""
    flags = Flags.parse(argv)
    if concurrency is not None:
        flags = flags.set("--max-concurrency", str(int(concurrency)))
    if request_rate is not None:
        flags = flags.set("--request-rate", "inf" if math.isinf(request_rate) else f"{request_rate:g}")
    return flags.to_argv()


def takes_seed(argv: list[str] | tuple[str, ...]) -> bool:
    """True for clients with a ``--seed`` that draws their random prompts: SGLang's
    ``bench_serving`` (default 1), ``vllm bench serve`` (default 0) and the demo's bundled
    client (default 1). With their default every run sends the same prompts, which a
    server's prefix cache then serves."""
    return detect_tool(argv) in ("sglang", "vllm") or "optui.demo.bench_client" in [str(t) for t in argv]


def with_run_seed(argv: list[str] | tuple[str, ...], seed: int) -> tuple[list[str], int | None]:
    """``argv`` of one run with fresh prompts: ``--seed SEED`` added when the client
    :func:`takes_seed` and the argv sets none. Returns the argv and the seed the run uses
    (the argv's own when it sets one; None when the client has no seed optui knows)."""
    flags = Flags.parse(argv)
    own = _last(flags, "--seed")
    if own is not None:
        return list(argv), as_int(own)
    if not takes_seed(argv):
        return list(argv), None
    return flags.set("--seed", str(seed)).to_argv(), seed


def merge_results(file_results: list[BenchResult], log_results: list[BenchResult], args: dict) -> list[BenchResult]:
    """Combine a run's saved result file with its parsed stdout (and its argv's
    :func:`workload_args`): the file's numbers win (full precision, every percentile);
    what it lacks comes from the log (SGLang's JSONL has no failed count and no
    ``num_prompts``; vLLM's JSON no dataset or lengths), then from the argv.

    ``file_results`` empty → ``log_results`` unchanged (the fallback). Results pair up by
    position when both sides have the same number of results, else each file result is
    completed from the argv only. Every returned file result has ``extra["source"] = "file"``.
    """
    if not file_results:
        return list(log_results)
    paired = len(file_results) == len(log_results)
    merged = []
    for i, result in enumerate(file_results):
        log = log_results[i] if paired else None
        if log is not None:
            for key in ("failed", "accept_length", "max_concurrency", "request_rate", "tool_version"):
                if getattr(result, key) is None and getattr(log, key) is not None:
                    setattr(result, key, getattr(log, key))
            for key, value in log.extra.items():
                result.extra.setdefault(key, value)
        result.workload = _merge_workload(result, log.workload if log is not None else None, args)
        if result.failed is None and result.completed is not None and result.workload.num_prompts is not None:
            if result.workload.num_prompts >= result.completed:
                result.failed = result.workload.num_prompts - result.completed
        result.extra["source"] = "file"
        merged.append(result)
    return merged


def _merge_workload(result: BenchResult, log: Workload | None, args: dict) -> Workload:
    own = result.workload
    argv_wl = Workload(
        dataset=args.get("dataset_name"),
        input_len=args.get("random_input_len", args.get("input_len")),
        output_len=args.get("random_output_len", args.get("output_len")),
        num_prompts=args.get("num_prompts"),
        max_concurrency=args.get("max_concurrency"),
        request_rate=args.get("request_rate"),
    )
    fields = {}
    for name in ("dataset", "input_len", "output_len", "num_prompts", "max_concurrency", "request_rate"):
        value = getattr(own, name)
        for other in (log, argv_wl):
            if value is None and other is not None:
                value = getattr(other, name)
        fields[name] = value
    if fields["dataset"] is not None and not str(fields["dataset"]).startswith("random"):
        fields["input_len"] = fields["output_len"] = None  # unused defaults for ShareGPT & co.
    if result.max_concurrency is None:
        result.max_concurrency = fields["max_concurrency"]
    if result.request_rate is None:
        result.request_rate = fields["request_rate"]
    return replace(own, tool=result.tool, **fields)


"""Parsing benchmark client output: "Serving Benchmark Result" blocks and tqdm progress.

Formats (``../shared/reference/servers_and_bench.md`` section 3):

- SGLang ``python -m sglang.bench_serving``: 0.5.2 (``python/sglang/bench_serving.py``, no
  TPOT section) and 0.5.23 (``python/sglang/benchmark/serving.py``: Accept length, Goodput
  and Cache Hit Details sections). The block starts with a blank line, rows are
  ``"{:<40} {:<10}"`` (so they end in padding spaces); there is no failed count, so
  ``failed = num_prompts - successful`` with ``num_prompts`` from the ``Namespace(...)``
  line printed before the run.
- vLLM ``vllm bench serve`` 0.33 (``vllm/benchmarks/serve.py``: Failed requests, configured
  rate, ``P99.9``-style percentiles, Speculative Decoding section) and early-2025
  ``benchmarks/benchmark_serving.py`` (``Total Token throughput`` with a capital T).

Every label is optional and matched case-insensitively by name (:mod:`optui.core.bench.canon`
maps names onto :class:`BenchResult`), never by position. Logs may have CRLF endings, ANSI
escapes and tqdm ``\\r`` redraws mixed in. Text never raises: unrecognisable text gives ``[]``.
Result files (SGLang JSONL, vLLM JSON, optui's own JSON) are :mod:`optui.core.bench.files`;
:func:`parse_any` picks one of the two.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from optui.core.bench.canon import BenchParseError, classify, finish, leading_number, parse_value, snake, store
from optui.core.bench.files import looks_like_json, parse_result_file_text
from optui.core.bench.result import BenchResult
from optui.core.text.textstream import strip_ansi

__all__ = [
    "BenchParseError",
    "Progress",
    "parse_any",
    "parse_bench_output",
    "parse_progress",
    "parse_result_file_text",
]

_HEADER = "= Serving Benchmark Result ="
_CLOSE = "\n" + "=" * 20  # the closing line is "=" * 50
_NAMESPACE = "Namespace("  # the client's arguments (a server's Namespace has no num_prompts)
# In a run without a result block: markers of the failure. A traceback counts only at the
# start of a line (both tools also print per-request error reprs containing one) and only
# in a run whose arguments were printed; its last line (the exception) is the message.
_TRACEBACK = "Traceback (most recent call last):"
_FATAL_RE = re.compile(
    r"All requests failed|Warmup failed|Initial test run failed|is not ready\. Exiting\."
    rf"|(?P<tb>^{re.escape(_TRACEBACK)})",
    re.M,
)
_EXC_RE = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception)|KeyboardInterrupt)\b[^\n]*", re.M)
_VALUE_RE = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|[^,()\s]+")
# Namespace arguments optui uses (workload and failed count).
_ARG_KEYS = ("num_prompts", "dataset_name", "random_input_len", "random_output_len", "input_len", "output_len",
             "max_concurrency", "request_rate")
_POSITION_RE = re.compile(r"spec_position_(\d+)")

# Section headers only SGLang prints (vLLM: "Inter-token Latency", "End-to-end Latency").
_SGLANG_HEADERS = frozenset({"End-to-End Latency", "Inter-Token Latency", "Goodput", "Cache Hit Details"})
_SGLANG_KEYS = frozenset({"backend", "concurrency", "traffic_request_rate", "max_request_concurrency",
                          "max_reqeuest_concurrency", "accept_length"})
# vLLM prints these just before the block (serve.py, benchmark_serving.py): "Traffic request
# rate: inf", "Maximum request concurrency: None"; they fill the block's missing fields.
# Versions that log them (logger.info) put vLLM's record prefix before them.
_PRE_BLOCK = (("Traffic request rate:", "request_rate"), ("Maximum request concurrency:", "max_concurrency"))
_LOG_PREFIX_RE = re.compile(
    r"(?:\([^)\n]*\) )?(?:DEBUG|INFO|WARNING) \d{2}-\d{2} \d{2}:\d{2}:\d{2}(?: \[[\w./-]+:\d+\]| [\w./-]+:\d+\]) ")
_SECTION_PREFIX = {"speculative decoding": "spec_", "diffusion decoding": "diffusion_"}
_CACHE_SECTION = "cache hit details"
_ROW_WIDTH = 40  # rows are "{:<40} {:<10}": the value starts in column 41
_COLLAPSED_RE = re.compile(r"^Successful requests: \S", re.M)


def parse_bench_output(text: str) -> list[BenchResult]:
    """Every benchmark run in a client log, in order: one :class:`BenchResult` per result
    block (a sweep has several), plus a ``status="failed"`` result for a run that died
    without a block (SGLang prints ``UserWarning: All requests failed`` then raises
    ``IndexError``; warmup / initial-test / readiness failures). Tool is "sglang" or "vllm",
    ``tool_version`` None. Never raises; ``[]`` for text with no recognisable run."""
    text = _normalise(text)
    results: list[BenchResult] = []
    args: dict = {}
    args_text = ""
    run_start = 0  # where the current run's text starts
    run_blocks = 0
    consumed = 0
    # Runs are split at the client's Namespace lines (str.find beats a regex scan here).
    events = [(pos, True) for pos in _find_all(text, _HEADER)]
    events += [(pos, False) for pos in _find_all(text, _NAMESPACE)]
    events.sort()
    previous = 0  # end of the previous event's text
    for pos, is_header in events:
        if pos < consumed:
            continue
        if is_header:
            block, consumed = _parse_block(text, pos + len(_HEADER), _pre_block_args(text, max(previous, run_start), pos, args))
            previous = consumed
            if block is not None:
                results.append(block)
                run_blocks += 1
            continue
        end = _line_end(text, pos)
        if text.find("num_prompts=", pos, end) < 0:
            continue
        if not run_blocks:
            results.extend(_failed_run(text, run_start, pos, args, args_text))
        run_start, run_blocks = pos, 0
        previous = end
        start = pos + len(_NAMESPACE)
        if end - start != len(args_text) or not text.startswith(args_text, start):
            args_text = text[start:end]  # (SGLang prints the same Namespace twice)
            args = _parse_args(args_text)
    if not run_blocks:
        results.extend(_failed_run(text, run_start, len(text), args, args_text))
    return results


def _pre_block_args(text: str, start: int, end: int, args: dict) -> dict:
    """``args`` updated by the :data:`_PRE_BLOCK` lines vLLM printed in ``text[start:end]``
    (at a line start; the run's own values, so they win over the Namespace's)."""
    found = {}
    for label, key in _PRE_BLOCK:
        pos = text.rfind(label, start, end)
        line_start = text.rfind("\n", 0, pos) + 1
        if pos >= 0 and (pos == line_start or _LOG_PREFIX_RE.fullmatch(text, line_start, pos)):
            value = text[pos + len(label) : _line_end(text, pos)].strip()
            parsed = parse_value(value) if value else None
            if isinstance(parsed, str):  # "15.0 RPS." (a unit), "4  <- note"
                lead = leading_number(parsed)
                parsed = parsed if lead is None else lead
            found[key] = parsed
    return {**args, **found} if found else args


def _normalise(text: str) -> str:
    if "\x1b" in text:
        text = strip_ansi(text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")  # tqdm redraws become lines
    return text


def _find_all(text: str, needle: str):
    pos = text.find(needle)
    while pos >= 0:
        yield pos
        pos = text.find(needle, pos + 1)


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _parse_args(args_text: str) -> dict:
    """The :data:`_ARG_KEYS` of a ``Namespace(...)`` line, typed (strings unquoted)."""
    args = {}
    for key in _ARG_KEYS:
        pos = args_text.find(key + "=")
        while pos > 0 and (args_text[pos - 1].isalnum() or args_text[pos - 1] == "_"):
            pos = args_text.find(key + "=", pos + 1)  # "input_len=" inside "random_input_len="
        if pos >= 0:
            found = _VALUE_RE.match(args_text, pos + len(key) + 1)
            if found is not None:
                value = found.group()
                args[key] = value[1:-1] if value[0] in "'\"" else parse_value(value)
    return args


def _failed_run(text: str, start: int, end: int, args: dict, args_text: str) -> list[BenchResult]:
    """``[failed result]`` when the run in ``text[start:end]`` (which has no result block)
    shows a failure marker, else ``[]``. The error is the markers' lines, joined."""
    errors: list[str] = []
    last = start
    for match in _FATAL_RE.finditer(text, start, end):
        if match.group("tb") is None:
            line_start = match.start()
            if text.startswith("is not", line_start):  # "Server at URL is not ready. Exiting."
                line_start = text.rfind("\n", 0, line_start) + 1
            errors.append(text[line_start : _line_end(text, line_start)].strip())
            last = match.end()
        elif errors or args_text:
            exc = _EXC_RE.search(text, match.end(), end)
            if exc is not None:
                errors.append(exc.group().strip())
                last = exc.end()
    if not errors:
        return []
    messages = list(dict.fromkeys(errors))
    status = "aborted" if any(m.startswith("KeyboardInterrupt") for m in messages) else "failed"
    tool = _guess_tool(args_text, text[start:last])
    result = finish(BenchResult(tool=tool, status=status, error="; ".join(messages)), args)
    if any(m.startswith("All requests failed") for m in messages):
        result.completed = 0
        result.failed = result.workload.num_prompts
    return [result]


def _guess_tool(args_text: str, context: str) -> str:
    """Which client died: argument names only one of them has, else paths in the traceback."""
    if "percentile_metrics=" in args_text or "save_result=" in args_text:
        return "vllm"
    if "warmup_requests=" in args_text or "output_file=" in args_text or "Warmup failed" in context:
        return "sglang"
    if "sglang" in context:
        return "sglang"
    if "vllm" in context or "Initial test run failed" in context:
        return "vllm"
    return "unknown"


def _parse_block(text: str, start: int, args: dict) -> tuple[BenchResult | None, int]:
    """The block whose header ends at ``start``: ``(result, end)`` where ``end`` is the
    closing ``=====`` line, or the next header / end of text for a block cut off there
    (``extra["truncated"] = True``). The result is None when no row could be read."""
    close = text.find(_CLOSE, start)
    end = text.find(_HEADER, start, len(text) if close < 0 else close)
    result = BenchResult()
    if end < 0 and close >= 0:
        end = close
    else:
        end = len(text) if end < 0 else end
        result.extra["truncated"] = True
        result.partial = True
    sglang = False
    actions = _ACTIONS[""]
    section = ""
    cache_rate_seen = False
    rows = 0
    body = text[start:end]
    # A block pasted from a web page has its padding collapsed to one space: then a strict
    # row's one space is the page's, not stray text (both tools print "Successful requests:").
    one_space = 1 if _COLLAPSED_RE.search(body) else None
    for line in body.split("\n"):
        label, sep, rest = line.partition(":")
        if not sep:  # section headers have no ":"
            if line.startswith("--"):
                header = line.strip("- \t")
                sglang = sglang or header in _SGLANG_HEADERS
                section = header.lower()
                actions = _ACTIONS.setdefault(section, {}) if len(_ACTIONS) < 64 else {}
            continue
        value = rest.strip()
        if not value or rest[0] not in " \t":
            continue  # not a row ("http://...", "12:30:01") or a bare sub-header
        kind, key, target, strict = actions.get(label) or _row_action(actions, section, label)
        if strict:
            gap = len(rest) - len(rest.lstrip())
            if gap != max(_ROW_WIDTH - len(label), 1) and gap != one_space:
                continue  # not formatted like the tool's "{:<40} {:<10}" rows: stray text
        rows += 1
        if kind == "plain":
            if target[0] == "latency":  # most rows are numbers: skip the general path
                try:
                    getattr(result, target[1])[target[2]] = float(value)
                    continue
                except ValueError:
                    pass
            elif target[0] == "float":
                try:
                    setattr(result, target[1], float(value))
                    continue
                except ValueError:
                    pass
        elif kind == "sglang":
            sglang = True
        elif kind == "cache_rate":
            cache_rate_seen = True
        elif kind == "cache_tier":
            tier, _, backend = key.partition(":")
            key = f"cache_{tier}_hit_rate_pct" if cache_rate_seen else f"cache_{tier}_cached_tokens"
            target = ("extra", key, "")
            if backend:
                result.extra["cache_storage_backend"] = backend
        store(result, target, key, parse_value(value))
    if not rows:
        return None, end
    result.tool = "sglang" if sglang else "vllm"
    finish(result, args)
    if result.partial and result.status == "ok":  # never half a run presented as a whole one
        result.status = "partial"
        result.error = result.error or "result block cut short: fields after the cut are null"
    return result, end


# section -> label -> row action; labels repeat across blocks, so each is worked out once.
_ACTIONS: dict[str, dict[str, tuple]] = {"": {}}


def _row_action(actions: dict, section: str, label: str) -> tuple[str, str, tuple, bool]:
    """How to file a row: ``(kind, key, classify(key), strict)``. Kind is "plain", "sglang"
    (a label only SGLang prints), "cache_rate" (``Cache hit rate``) or "cache_tier" (the
    duplicated ``  Device:``/``  Host:``/``  Storage (x):`` labels of Cache Hit Details:
    tokens before ``Cache hit rate``, percentages after). Strict rows go to ``extra`` and
    are kept only when padded like the tool's rows, which keeps stray log text out."""
    key = snake(label)
    kind = "sglang" if key in _SGLANG_KEYS else "plain"
    if section == _CACHE_SECTION:
        tier = "storage" if key.startswith("storage") else key
        if label.startswith(" ") and tier in ("device", "host", "storage"):
            backend = label.partition("(")[2].rstrip(") ") if tier == "storage" else ""
            kind, key = "cache_tier", f"{tier}:{backend}"
        elif key == "cache_hit_rate":
            kind, key = "cache_rate", "cache_hit_rate_pct"
        else:
            key = f"cache_{key}"
    elif section in _SECTION_PREFIX:
        key = _SECTION_PREFIX[section] + key
        position = _POSITION_RE.fullmatch(key)
        if position:
            key = f"spec_position_{position.group(1)}_acceptance_pct"
    target = classify(key)
    action = (kind, key, target, kind == "cache_tier" or target[0] == "extra")
    if len(actions) < 256:  # stray text must not grow the table forever
        actions[label] = action
    return action


@dataclass(frozen=True, slots=True)
class Progress:
    """One tqdm progress reading: ``done`` of ``total`` requests (None when unknown),
    ``pct`` percent (0-100), ``rate`` requests/s, ``elapsed_s`` and ``eta_s`` seconds."""

    done: int
    total: int | None = None
    pct: float | None = None
    rate: float | None = None
    elapsed_s: float | None = None
    eta_s: float | None = None


# tqdm's default format: "{l_bar}{bar}| {n}/{total} [{elapsed}<{remaining}, {rate}]", or
# "{n}it [{elapsed}, {rate}]" without a total (tqdm/std.py format_meter).
# The lookbehind keeps matching linear on long digit runs (no retry inside a number).
_PROGRESS_RE = re.compile(
    r"(?<![\d.])(?:(?P<pct>\d{1,3})%\|[^|\n]*\|\s*)?(?P<n>\d+)(?:/(?P<total>\d+)|it)\s*"
    r"\[(?P<elapsed>(?:\d+:)*\d+)(?:<(?P<eta>(?:\d+:)*\d+|\?))?,\s*"
    r"(?P<rate>\d+(?:\.\d+)?|\?)\s*(?P<scale>[kMG]?)(?P<unit>it/s|s/it)"
)
_SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}
_PROGRESS_TAIL = 2000  # characters of a line searched for the last reading


def parse_progress(line: str) -> Progress | None:
    """The last tqdm reading in ``line`` (which may hold several ``\\r`` redraws), e.g.
    `` 45%|████▌     | 450/1000 [00:30<00:36, 15.12it/s]``; ``s/it`` rates are inverted,
    ``?`` gives None, times may be ``mm:ss`` or ``h:mm:ss``. None when there is none."""
    if len(line) > _PROGRESS_TAIL:  # a bar is short; a huge "line" is something else
        line = line[-_PROGRESS_TAIL:]
    match = next(reversed(list(_PROGRESS_RE.finditer(line))), None)
    if match is None:
        return None
    done = int(match["n"])
    total = int(match["total"]) if match["total"] else None
    pct: float | None
    if total:
        pct = 100.0 * done / total
    else:
        pct = float(match["pct"]) if match["pct"] else None
    rate = None
    if match["rate"] != "?":
        value = float(match["rate"]) * _SCALE[match["scale"]]
        if match["unit"] == "it/s":
            rate = value
        elif value > 0:
            rate = 1.0 / value
    eta = match["eta"]
    return Progress(
        done=done,
        total=total,
        pct=pct,
        rate=rate,
        elapsed_s=_clock_seconds(match["elapsed"]),
        eta_s=_clock_seconds(eta) if eta and eta != "?" else None,
    )


def _clock_seconds(clock: str) -> float:
    seconds = 0
    for part in clock.split(":"):
        seconds = seconds * 60 + int(part)
    return float(seconds)


def parse_any(text: str, name: str = "") -> list[BenchResult]:
    """Results from a saved result file (JSON / JSONL, see
    :func:`~optui.core.bench.files.parse_result_file_text`) or a client log
    (:func:`parse_bench_output`), sniffed from the first character. A JSON-looking file
    that does not parse falls back to the log parser when it holds a result block;
    otherwise :class:`BenchParseError` (``name:LINE: ...``) propagates."""
    if looks_like_json(text):
        try:
            return parse_result_file_text(text, name)
        except BenchParseError:
            if _HEADER not in text:
                raise
    return parse_bench_output(text)

"""The configuration a server really runs, compared with the argv an experiment is credited to.

After a restart the ready gate asks the server what it runs (:class:`RunningConfig`, read
by :meth:`optui.adapters.probe.ServerProbe.running_config`) and :func:`check_config`
compares it with the flags of the argv: a flag the server did not apply (an ignored flag, a
wrapper script that drops it, a value capped behind the operator's back) marks the
experiment ``unverified`` with the fields that differ. Only flags present in the argv are
checked (the server's defaults are its own business); a server that reports nothing leaves
the experiment ``unchecked``, never ``unverified``.

What each server reports (``../shared/reference/servers_and_bench.md`` 1.2/1.3,
``tests/peers/NOTES.md``):

- SGLang: ``/server_info`` (0.5.23; ``/get_server_info`` on 0.5.2, tried on 404): every
  resolved ServerArgs field (``max_running_requests``, ``tp_size``, ``mem_fraction_static``,
  ``context_length``...) and ``version``.
- vLLM: ``/v1/models`` ``data[0].max_model_len``; the ``vllm:cache_config_info`` gauge of
  ``/metrics``, whose labels are the CacheConfig fields (``block_size``,
  ``gpu_memory_utilization``, ``cache_dtype``, ``enable_prefix_caching``); ``/version``.
- llama.cpp: ``/props`` ``total_slots`` (``-np``), ``default_generation_settings.n_ctx``
  (the context **per slot**: ``-c / -np`` without ``--kv-unified``, ``-c`` with it, capped
  at the model's ``n_ctx_train`` from ``/v1/models`` ``meta``), ``build_info`` as the version.

Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from optui.core.flags.argv import Flags

#: (flag spellings, reported field, value type) per server kind; type is "int", "float",
#: "str", "human_int" (vLLM's 32k / 32K) or "true"/"false" (an on/off flag's meaning)
_FLAG_FIELDS: dict[str, tuple[tuple[tuple[str, ...], str, str], ...]] = {
    "sglang": (
        (("--max-running-requests",), "max_running_requests", "int"),
        (("--tp-size", "--tensor-parallel-size", "--tp"), "tp_size", "int"),
        (("--dp-size", "--data-parallel-size", "--dp"), "dp_size", "int"),
        (("--mem-fraction-static",), "mem_fraction_static", "float"),
        (("--context-length",), "context_length", "int"),
        (("--chunked-prefill-size",), "chunked_prefill_size", "int"),
        (("--max-prefill-tokens",), "max_prefill_tokens", "int"),
        (("--cuda-graph-max-bs",), "cuda_graph_max_bs", "int"),
        (("--kv-cache-dtype",), "kv_cache_dtype", "str"),
        (("--schedule-policy",), "schedule_policy", "str"),
        (("--disable-radix-cache",), "disable_radix_cache", "true"),
        (("--disable-cuda-graph",), "disable_cuda_graph", "true"),
    ),
    "vllm": (
        (("--max-model-len",), "max_model_len", "human_int"),
        (("--gpu-memory-utilization",), "gpu_memory_utilization", "float"),
        (("--block-size",), "block_size", "int"),
        (("--kv-cache-dtype",), "cache_dtype", "str"),
        (("--enable-prefix-caching",), "enable_prefix_caching", "true"),
        (("--no-enable-prefix-caching",), "enable_prefix_caching", "false"),
    ),
    "llamacpp": (
        (("-np", "--parallel"), "total_slots", "int"),
    ),
}
_HUMAN = re.compile(r"^(\d+(?:\.\d+)?)([kKmMgGtT]?)$")
_HUMAN_FACTOR = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
                 "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


@dataclass(frozen=True, slots=True)
class RunningConfig:
    """What a server reported about itself: ``fields`` (name → value as reported),
    ``source`` (the endpoints read, e.g. ``"/server_info"``), ``version`` (or None)."""

    source: str
    fields: Mapping[str, object]
    version: str | None = None


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One flag the server does not run as given: ``flag`` as written in the argv (with its
    value), the reported ``field``, the ``expected`` and the ``actual`` value."""

    flag: str
    field: str
    expected: object
    actual: object

    def describe(self) -> str:
        """``--max-running-requests 8: server runs max_running_requests=32``."""
        return f"{self.flag}: server runs {self.field}={_show(self.actual)} (expected {_show(self.expected)})"

    def to_json(self) -> dict:
        """``{"flag", "field", "expected", "actual"}``."""
        return {"flag": self.flag, "field": self.field, "expected": self.expected, "actual": self.actual}


@dataclass(frozen=True, slots=True)
class ConfigCheck:
    """The outcome of :func:`check_config`.

    ``status``: "verified" (every checked field as the argv says), "unverified" (at least
    one ``mismatches``), "unchecked" (the server reported nothing usable; ``reason`` says
    why). ``checked`` names the fields compared; ``source`` the endpoints read.
    """

    status: str
    checked: tuple[str, ...] = ()
    mismatches: tuple[Mismatch, ...] = ()
    source: str = ""
    reason: str | None = None

    def describe(self) -> tuple[str, ...]:
        """One line per mismatch (empty unless unverified)."""
        return tuple(m.describe() for m in self.mismatches)

    def to_json(self) -> dict:
        """The ``config_check`` of a ``server.ready`` event."""
        return {"status": self.status, "checked": list(self.checked), "source": self.source, "reason": self.reason,
                "mismatches": [m.to_json() for m in self.mismatches]}


def mismatch_lines(config_check: object) -> tuple[str, ...]:
    """The mismatch lines of a journaled ``config_check`` (``server.ready`` data); empty
    for anything else (older events have none)."""
    if not isinstance(config_check, Mapping):
        return ()
    out = []
    for m in config_check.get("mismatches") or ():
        if isinstance(m, Mapping):
            out.append(Mismatch(str(m.get("flag", "?")), str(m.get("field", "?")), m.get("expected"), m.get("actual")).describe())
    return tuple(out)


# ------------------------------------------------------------------ what servers report
def sglang_config(server_info: object, source: str = "/server_info") -> RunningConfig | None:
    """SGLang's ``/server_info`` (or ``/get_server_info``) body; a PD router's
    ``{"prefill": [...], "decode": [...]}`` is read from its first decode entry."""
    if isinstance(server_info, Mapping) and isinstance(server_info.get("decode"), list) and server_info["decode"]:
        server_info = server_info["decode"][0]
    if not isinstance(server_info, Mapping):
        return None
    version = server_info.get("version")
    return RunningConfig(source, dict(server_info), str(version) if version is not None else None)


def llamacpp_config(props: object, models: object = None) -> RunningConfig | None:
    """llama.cpp's ``/props`` body (+ ``/v1/models`` for the model's ``n_ctx_train``)."""
    if not isinstance(props, Mapping):
        return None
    fields: dict[str, object] = {}
    if "total_slots" in props:
        fields["total_slots"] = props["total_slots"]
    settings = props.get("default_generation_settings")
    if isinstance(settings, Mapping) and "n_ctx" in settings:
        fields["n_ctx"] = settings["n_ctx"]
    data = models.get("data") if isinstance(models, Mapping) else None
    with_models = isinstance(data, list) and bool(data)
    if isinstance(data, list) and data and isinstance(data[0], Mapping):
        meta = data[0].get("meta")
        if isinstance(meta, Mapping) and "n_ctx_train" in meta:
            fields["n_ctx_train"] = meta["n_ctx_train"]
    build = props.get("build_info")
    return RunningConfig("/props" + (" + /v1/models" if with_models else ""), fields, str(build) if build else None)


def vllm_config(models: object, metrics_text: str = "", version: str | None = None) -> RunningConfig | None:
    """vLLM's ``/v1/models`` body and ``/metrics`` text (the ``vllm:cache_config_info``
    labels); None when neither says anything."""
    fields: dict[str, object] = {}
    sources = []
    data = models.get("data") if isinstance(models, Mapping) else None
    if isinstance(data, list) and data and isinstance(data[0], Mapping) and "max_model_len" in data[0]:
        fields["max_model_len"] = data[0]["max_model_len"]
        sources.append("/v1/models")
    labels = cache_config_labels(metrics_text)
    if labels:
        fields.update(labels)
        sources.append("/metrics vllm:cache_config_info")
    if not fields:
        return None
    return RunningConfig(" + ".join(sources), fields, version)


_CACHE_INFO = re.compile(r"^vllm:cache_config_info\{(?P<labels>.*)\}\s+\S+\s*$", re.M)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def cache_config_labels(metrics_text: str) -> dict[str, str]:
    """The labels of the first ``vllm:cache_config_info{...}`` sample (empty when absent)."""
    match = _CACHE_INFO.search(metrics_text or "")
    if match is None:
        return {}
    return {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _LABEL.findall(match["labels"])}


# ------------------------------------------------------------------ the comparison
def check_config(kind: str, argv: Sequence[str], running: RunningConfig | None) -> ConfigCheck:
    """Compare the flags of ``argv`` with what the server of ``kind`` reported (see module
    doc). Never raises: a field the server does not report is not checked."""
    if running is None:
        return ConfigCheck("unchecked", reason=f"the server reported no configuration ({_endpoints(kind)})")
    flags = Flags.parse(argv)
    checked: list[str] = []
    mismatches: list[Mismatch] = []
    for names, field, typ in _FLAG_FIELDS.get(kind, ()):
        name = next((n for n in names if flags.has(n)), None)
        if name is None or field not in running.fields:
            continue
        values = flags.get(name) or ()
        if typ in ("true", "false"):
            expected: object = typ == "true"
            written = name
        else:
            if len(values) != 1:
                continue
            expected = _parse(values[0], typ)
            written = f"{name} {values[0]}"
            if expected is None or (isinstance(expected, int) and typ == "int" and expected < 0):  # "auto", -1 (llama.cpp, vLLM): the server decides
                continue
        checked.append(field)
        actual = running.fields[field]
        if not _same(expected, actual, typ):
            mismatches.append(Mismatch(written, field, expected, actual))
    if kind == "llamacpp":
        _check_llamacpp_ctx(flags, running.fields, checked, mismatches)
    if not checked:
        reason = (f"none of the argv's flags that optui checks is reported by {running.source or 'the server'}"
                  if kind in _FLAG_FIELDS else f"no configuration check for kind {kind!r}")
        return ConfigCheck("unchecked", (), (), running.source, reason)
    return ConfigCheck("unverified" if mismatches else "verified", tuple(checked), tuple(mismatches), running.source)


def _check_llamacpp_ctx(flags: Flags, fields: Mapping[str, object], checked: list[str], mismatches: list[Mismatch]) -> None:
    """``-c`` is the context of all slots together; ``/props`` reports one slot's: ``-c /
    -np`` (``-c`` itself with ``--kv-unified``), capped at the model's ``n_ctx_train``;
    ``-c 0`` means the model's. Checked only when the slot count is given (the default
    slot count and unified mode are the server's choice)."""
    ctx_name = next((n for n in ("-c", "--ctx-size") if flags.has(n)), None)
    np_name = next((n for n in ("-np", "--parallel") if flags.has(n)), None)
    if ctx_name is None or "n_ctx" not in fields:
        return
    ctx, slots = _parse_int(_one(flags.get(ctx_name))), _parse_int(_one(flags.get(np_name)) if np_name else None)
    unified = flags.has("--kv-unified") or flags.has("-kvu")
    train = _as_int(fields.get("n_ctx_train"))
    if ctx is None or (slots is None and not unified) or (slots is not None and slots <= 0):
        return
    if ctx == 0:
        if train is None:
            return
        per_slot = train
    else:
        per_slot = ctx if unified or slots is None else ctx // slots  # slots is None only when unified
        if train is not None:
            per_slot = min(per_slot, train)
    checked.append("n_ctx")
    if _as_int(fields["n_ctx"]) != per_slot:
        written = f"{ctx_name} {ctx}" + (f" {np_name} {slots}" if np_name else "") + (" --kv-unified" if unified else "")
        mismatches.append(Mismatch(written, "n_ctx", per_slot, fields["n_ctx"]))


def _endpoints(kind: str) -> str:
    return {"sglang": "/server_info, /get_server_info", "vllm": "/v1/models, /metrics", "llamacpp": "/props"}.get(kind, "none known")


def _one(values: tuple[str, ...] | None) -> str | None:
    return values[0] if values and len(values) == 1 else None


def _parse(text: str | None, typ: str) -> object:
    """The argv value as the type the server reports, None when it means "decide yourself"
    or cannot be read (the flag check of the catalogue reports that, not this one)."""
    if text is None:
        return None
    try:
        if typ == "int":
            return int(text)
        if typ == "float":
            value = float(text)
            return value if math.isfinite(value) else None
        if typ == "human_int":
            match = _HUMAN.match(text.strip())
            if match is None:
                return None  # "auto", "-1"
            return int(float(match[1]) * _HUMAN_FACTOR[match[2]])
    except ValueError:
        return None
    return text


def _parse_int(text: str | None) -> int | None:
    """:func:`_parse` of an ``int`` value."""
    value = _parse(text, "int")
    return value if isinstance(value, int) else None


def _as_int(value: object) -> int | None:
    try:
        return int(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _same(expected: object, actual: object, typ: str) -> bool:
    if typ in ("true", "false"):
        return (str(actual).lower() in ("true", "1")) == expected
    if typ in ("int", "human_int"):
        return _as_int(actual) == expected and _as_int(actual) is not None
    if typ == "float":
        try:
            return math.isclose(float(actual), float(expected), rel_tol=1e-6, abs_tol=1e-9)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
    return str(actual) == str(expected)


def _show(value: object) -> str:
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)

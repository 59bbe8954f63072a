"""The fleet, pure: GPUs that Prometheus scrapes from exporters, one record per GPU.

Two exporters are understood (docs/fleet.md has the tables and the sources):

- **dcgm-exporter** (NVIDIA, the primary mapping; its ``etc/default-counters.csv``): one series
  per GPU and field, labels ``gpu`` (index), ``UUID``, ``device``, ``modelName``, ``Hostname``
  (plus Prometheus's ``instance``/``job``). ``DCGM_FI_DEV_FB_USED`` / ``_FB_FREE`` /
  ``_FB_RESERVED`` (MiB), ``DCGM_FI_DEV_GPU_UTIL`` (%), ``DCGM_FI_DEV_MEM_COPY_UTIL`` (%,
  memory bandwidth), ``DCGM_FI_DEV_GPU_TEMP`` (°C), ``DCGM_FI_DEV_POWER_USAGE`` (W).
- **nvidia_gpu_exporter** (utkuozdemir; its ``METRICS.md``): ``nvidia_smi_*`` series labelled
  ``uuid`` only, in base units: ``nvidia_smi_memory_used_bytes`` / ``_free_bytes`` /
  ``_reserved_bytes`` (bytes), ``nvidia_smi_utilization_gpu_ratio`` /
  ``_utilization_memory_ratio`` (0-1), ``nvidia_smi_temperature_gpu`` (°C),
  ``nvidia_smi_power_draw_watts`` (W); index and model name are labels (``index``, ``name``) of
  ``nvidia_smi_gpu_info``.

A GPU's host is dcgm-exporter's ``Hostname`` label, else the scrape target's ``instance``
without its port. A field whose series is missing is None (shown n/a), never 0. A GPU whose
newest sample is older than 3 intervals (the larger of optui's interval and the exporter's
scrape gap seen so far, 1 min before one was seen) is stale, with its age; a GPU that left the answer (its exporter
stopped: Prometheus marks its series stale) stays listed, aging. Inference servers age the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace

from optui.core.fleet.query import SAMPLE_TIME_LABEL, PromSample, names_selector, values_with_sample_times
from optui.core.gpu.samples import GPU_JSON_KEYS

MIB = 1024.0 * 1024.0

#: Keys of a fleet GPU in ``optui gpus --json`` / ``status --json`` (:meth:`FleetGpu.to_json`):
#: those of every GPU (:data:`~optui.core.gpu.samples.GPU_JSON_KEYS`: ``name`` is the model), then
#: the fleet's own.
FLEET_GPU_JSON_KEYS = (*GPU_JSON_KEYS, "mem_free_mib", "exporter", "age_s", "stale")


@dataclass(frozen=True, slots=True)
class ExporterMapping:
    """How one exporter's series become records: ``fields`` maps a metric name to (record
    field, factor to optui's unit); the labels that carry the UUID, index, model and host
    (None: not on the value series); ``info`` a series whose labels give index/model (value
    ignored); ``timed`` the series whose sample time is the GPU's."""

    exporter: str
    fields: Mapping[str, tuple[str, float]]
    uuid_label: str
    index_label: str | None
    model_label: str | None
    host_label: str | None
    info: str | None
    timed: str

    def names(self) -> list[str]:
        """Every metric name this mapping reads."""
        return [*self.fields, *([self.info] if self.info else [])]


DCGM = ExporterMapping(
    exporter="dcgm",
    fields={
        "DCGM_FI_DEV_FB_USED": ("mem_used_mib", 1.0),
        "DCGM_FI_DEV_FB_FREE": ("mem_free_mib", 1.0),
        "DCGM_FI_DEV_FB_RESERVED": ("mem_reserved_mib", 1.0),
        "DCGM_FI_DEV_GPU_UTIL": ("util_gpu_pct", 1.0),
        "DCGM_FI_DEV_MEM_COPY_UTIL": ("util_mem_pct", 1.0),
        "DCGM_FI_DEV_GPU_TEMP": ("temp_c", 1.0),
        "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
    },
    uuid_label="UUID", index_label="gpu", model_label="modelName", host_label="Hostname", info=None,
    timed="DCGM_FI_DEV_FB_USED",
)

NVIDIA_SMI = ExporterMapping(
    exporter="nvidia_smi",
    fields={
        "nvidia_smi_memory_used_bytes": ("mem_used_mib", 1.0 / MIB),
        "nvidia_smi_memory_free_bytes": ("mem_free_mib", 1.0 / MIB),
        "nvidia_smi_memory_reserved_bytes": ("mem_reserved_mib", 1.0 / MIB),
        "nvidia_smi_utilization_gpu_ratio": ("util_gpu_pct", 100.0),
        "nvidia_smi_utilization_memory_ratio": ("util_mem_pct", 100.0),
        "nvidia_smi_temperature_gpu": ("temp_c", 1.0),
        "nvidia_smi_power_draw_watts": ("power_w", 1.0),
    },
    uuid_label="uuid", index_label="index", model_label="name", host_label=None, info="nvidia_smi_gpu_info",
    timed="nvidia_smi_memory_used_bytes",
)

MAPPINGS = (DCGM, NVIDIA_SMI)
_BY_NAME = {name: mapping for mapping in MAPPINGS for name in mapping.names()}

#: GPUs stale after this many intervals without a new sample.
STALE_INTERVALS = 3
#: The scrape gap assumed for a GPU before two of its samples were seen: Prometheus's default
#: ``scrape_interval`` (1m). A single reading cannot tell a 15 s scrape from a stopped exporter
#: (whose series Prometheus marks stale: they leave the answer, so they are not read at all).
UNKNOWN_GAP_S = 60.0


#: The labels a GPU's series keep in the answer (what the mappings read; see fleet_query).
GPU_LABELS = tuple(dict.fromkeys(label for mapping in MAPPINGS for label in (
    mapping.uuid_label, mapping.index_label, mapping.model_label, mapping.host_label) if label)) + ("instance", "job")

#: Inference servers' gauges (the names core/server/metrics_map.py reads from a server's /metrics):
#: metric → (server kind, field, factor to optui's unit).
SERVER_GAUGES: dict[str, tuple[str, str, float]] = {
    "sglang:num_running_reqs": ("sglang", "running", 1.0),
    "sglang:num_queue_reqs": ("sglang", "waiting", 1.0),
    "sglang:token_usage": ("sglang", "kv_cache_pct", 100.0),
    "vllm:num_requests_running": ("vllm", "running", 1.0),
    "vllm:num_requests_waiting": ("vllm", "waiting", 1.0),
    "vllm:kv_cache_usage_perc": ("vllm", "kv_cache_pct", 100.0),
    "vllm:gpu_cache_usage_perc": ("vllm", "kv_cache_pct", 100.0),  # its name before vLLM 0.10
    "llamacpp:requests_processing": ("llamacpp", "running", 1.0),
    "llamacpp:requests_deferred": ("llamacpp", "waiting", 1.0),
    "llamacpp:kv_cache_usage_ratio": ("llamacpp", "kv_cache_pct", 100.0),
}
#: Generated-token counters; their ``irate`` (between the last two samples within
#: :data:`GEN_RATE_WINDOW`) per server is its tok/s now (``rate`` divides by the whole window:
#: a server scraped for 2 s of a 1 min window read 1/30 of its speed).
GEN_COUNTERS = ("sglang:generation_tokens_total", "vllm:generation_tokens_total", "llamacpp:tokens_predicted_total")
GEN_RATE_WINDOW = "1m"
#: The label of the generated tok/s series in the answer (``rate()`` drops the metric name).
GEN_RATE_LABEL = "optui_gen_tok_s"
#: The label of a server's sample-time series (``timestamp()`` of its gauges: its newest scrape).
SERVER_TIME_LABEL = "optui_server_time"


def fleet_query(selector: str | None = None) -> str:
    """The one PromQL query a tick: every series of :data:`MAPPINGS` (plus the sample time of
    each GPU's memory series) and the inference servers' :data:`SERVER_GAUGES` matching the
    user's ``selector`` (``{cluster="a"}``), plus each server's generated tok/s and newest
    scrape time (:data:`SERVER_TIME_LABEL`), for all GPUs and servers at once. Only the labels the mappings read stay (:data:`GPU_LABELS`; a
    server's gauges summed over its other labels, vLLM's ``engine``)."""
    names = [name for mapping in MAPPINGS for name in mapping.names()]
    gpus = values_with_sample_times(names, [mapping.timed for mapping in MAPPINGS], selector, keep=GPU_LABELS)
    servers = f"sum by (__name__, instance, job, model_name) ({names_selector(SERVER_GAUGES, selector)})"
    gen = names_selector(GEN_COUNTERS, selector)
    rate = (f'label_replace(sum by (instance, job) (irate({gen}[{GEN_RATE_WINDOW}])), "{GEN_RATE_LABEL}", "1", "", "")')
    # timestamp() drops the name: of one gauge per kind (several would be one label set twice, refused)
    running = names_selector([name for name, (_, field, _) in SERVER_GAUGES.items() if field == "running"], selector)
    times = f'label_replace(max by (instance, job) (timestamp({running})), "{SERVER_TIME_LABEL}", "1", "", "")'
    return f"{gpus} or {servers} or {rate} or {times}"


@dataclass(frozen=True, slots=True)
class FleetServer:
    """An inference server Prometheus scrapes (optui may or may not control it): its host
    (``instance`` without the port: the GPUs beside it are that host's), ``instance``, kind
    (``sglang`` / ``vllm`` / ``llamacpp``), model (``model_name`` label), requests running and
    waiting (summed over its series), KV cache use in %, generated tok/s (between its last two
    scrapes); None where its series is missing. ``sampled_at``: unix s of its newest scrape;
    ``age_s``: seconds from it to the reading; ``stale``: no new sample for
    :data:`STALE_INTERVALS` intervals (its exporter stopped: the last values, aging)."""

    host: str
    instance: str
    kind: str
    model: str | None = None
    job: str = ""
    running: float | None = None
    waiting: float | None = None
    kv_cache_pct: float | None = None
    gen_tok_s: float | None = None
    sampled_at: float | None = None
    age_s: float | None = None
    stale: bool = False

    @property
    def key(self) -> str:
        """What names this server across readings (``server:`` + its instance and job)."""
        return f"server:{self.instance}/{self.job}"

    def to_json(self) -> dict:
        """``{host, instance, kind, model, job, running, waiting, kv_cache_pct, gen_tok_s,
        sampled_at, age_s, stale}`` (null where unknown)."""
        return asdict(self)


def url_address(url: str) -> str | None:
    """``host:port`` of ``url`` as a Prometheus ``instance`` names it (the host lower-case, the
    scheme's port when none is given; ``http://NODE-7:8000/`` → ``node-7:8000``), or None."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if not parts.hostname:
        return None
    host = parts.hostname.lower()
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def configured_server(server: FleetServer, urls: Mapping[str, str]) -> str | None:
    """The ``[servers.NAME]`` whose URL (``urls``: name → url) is this fleet server's
    ``instance`` (host:port, the host compared without case), or None: a server optui also
    controls joins both views."""
    want = server.instance.lower()
    for name, url in urls.items():
        if url_address(url) == want:
            return name
    return None


def fleet_server_at(url: str, servers: Iterable[FleetServer]) -> FleetServer | None:
    """The fleet server whose ``instance`` is the address of ``url`` (a ``[servers.NAME]``'s),
    or None (the other side of :func:`configured_server`)."""
    want = url_address(url)
    return next((srv for srv in servers if srv.instance.lower() == want), None) if want else None


def servers_from_samples(samples: Iterable[PromSample]) -> list[FleetServer]:
    """One record per server (``instance`` and ``job``) of an answer of :func:`fleet_query`,
    sorted by host then instance; a generated-tok/s or sample-time series without gauges is
    left out. ``sampled_at`` is the server's :data:`SERVER_TIME_LABEL` series, else the
    answer's time."""
    found: dict[tuple[str, str], dict] = {}
    kv: dict[tuple[str, str], list[float]] = {}
    rates: dict[tuple[str, str], float] = {}
    times: dict[tuple[str, str], float] = {}
    for sample in samples:
        key = (sample.labels.get("instance", ""), sample.labels.get("job", ""))
        if GEN_RATE_LABEL in sample.labels or SERVER_TIME_LABEL in sample.labels:
            if sample.value is not None:
                (rates if GEN_RATE_LABEL in sample.labels else times)[key] = sample.value
            continue
        gauge = SERVER_GAUGES.get(sample.name)
        if gauge is None:
            continue
        kind, name, factor = gauge
        info = found.setdefault(key, {"kind": kind, "model": None, "at": sample.at})
        if sample.labels.get("model_name"):
            info["model"] = sample.labels["model_name"]
        if sample.value is None:
            continue
        if name == "kv_cache_pct":
            kv.setdefault(key, []).append(sample.value * factor)
        else:
            info[name] = info.get(name, 0.0) + sample.value * factor
    servers = []
    for (instance, job), info in found.items():
        values = kv.get((instance, job))
        servers.append(FleetServer(host=host_of({"instance": instance}, None), instance=instance, kind=info["kind"],
                                   model=info["model"], job=job, running=info.get("running"),
                                   waiting=info.get("waiting"), kv_cache_pct=sum(values) / len(values) if values else None,
                                   gen_tok_s=rates.get((instance, job)),
                                   sampled_at=times.get((instance, job), info["at"])))
    servers.sort(key=lambda srv: (srv.host, srv.instance))
    return servers


@dataclass(frozen=True, slots=True)
class FleetGpu:
    """One GPU of the fleet at one reading.

    Memory in MiB (``used`` excludes ``reserved``, as nvidia-smi's memory.used), utilization
    and memory-copy (bandwidth) utilization in %, temperature in °C, power in W; None = the
    series is missing (n/a, never 0). ``sampled_at``: unix s of the newest sample (Prometheus's
    scrape time); ``age_s``: seconds from it to the reading; ``stale``: no new sample for
    :data:`STALE_INTERVALS` intervals. ``exporter``: ``dcgm`` or ``nvidia_smi``."""

    host: str
    index: int | None
    uuid: str
    model: str | None
    exporter: str
    mem_used_mib: float | None = None
    mem_free_mib: float | None = None
    mem_reserved_mib: float | None = None
    util_gpu_pct: float | None = None
    util_mem_pct: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    sampled_at: float | None = None
    age_s: float | None = None
    stale: bool = False

    @property
    def key(self) -> str:
        """What names this GPU across readings: its UUID, else host and index."""
        return self.uuid or f"{self.host}#{self.index}"

    @property
    def mem_total_mib(self) -> float | None:
        """used + free + reserved (reserved counted 0 when unknown), or None."""
        if self.mem_used_mib is None or self.mem_free_mib is None:
            return None
        return self.mem_used_mib + self.mem_free_mib + (self.mem_reserved_mib or 0.0)

    def to_json(self) -> dict:
        """The JSON object: keys :data:`FLEET_GPU_JSON_KEYS`, null where unknown (the power
        limit: no mapping reads it)."""
        data = asdict(self)
        data.update(name=self.model, mem_total_mib=self.mem_total_mib, power_limit_w=None)
        return {key: data[key] for key in FLEET_GPU_JSON_KEYS}


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    """The whole fleet at one reading: GPUs sorted by host then index; ``taken_at`` local unix
    s; ``error``: why this reading failed (Prometheus down, slow, refused; the GPUs are the last
    known ones, aging); ``series``: series in the last answer (the query's cost); ``servers``:
    the inference servers (one that left the answer stays, aging, as GPUs do)."""

    gpus: tuple[FleetGpu, ...] = ()
    taken_at: float = 0.0
    error: str | None = None
    series: int = 0
    servers: tuple[FleetServer, ...] = ()

    def servers_by_host(self) -> dict[str, tuple[FleetServer, ...]]:
        """``{host: the inference servers on it}``."""
        out: dict[str, list[FleetServer]] = {}
        for server in self.servers:
            out.setdefault(server.host, []).append(server)
        return {host: tuple(servers) for host, servers in out.items()}

    def hosts(self) -> dict[str, tuple[FleetGpu, ...]]:
        """``{host: its GPUs}`` in host order."""
        out: dict[str, list[FleetGpu]] = {}
        for gpu in self.gpus:
            out.setdefault(gpu.host, []).append(gpu)
        return {host: tuple(gpus) for host, gpus in out.items()}


def host_of(labels: Mapping[str, str], host_label: str | None) -> str:
    """The GPU's host: ``host_label``'s value when set, else ``instance`` without its port
    (``10.0.0.7:9400`` → ``10.0.0.7``, ``[::1]:9400`` → ``::1``), else ``?``."""
    if host_label and labels.get(host_label):
        return labels[host_label]
    instance = labels.get("instance", "")
    if instance.startswith("["):
        return instance[1:].split("]", 1)[0]
    return re.sub(r":\d+$", "", instance) or "?"


def _index(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def records_from_samples(samples: Iterable[PromSample]) -> list[FleetGpu]:
    """One record per GPU from an answer of :func:`fleet_query` (series of other metrics are
    ignored). ``sampled_at`` is the GPU's timed series' sample time, else the answer's time."""
    fields: dict[tuple[str, str], dict] = {}
    meta: dict[tuple[str, str], dict] = {}
    for sample in samples:
        labels = sample.labels
        timed = SAMPLE_TIME_LABEL in labels
        mapping = _timed_mapping(labels) if timed else _BY_NAME.get(sample.name)
        if mapping is None:
            continue
        uuid = labels.get(mapping.uuid_label, "")
        info = meta.get((mapping.exporter, uuid)) if uuid else None
        if info is None:  # a GPU's first series: its host and key (the next ones share its labels)
            host = host_of(labels, mapping.host_label)
            index = _index(labels.get(mapping.index_label)) if mapping.index_label else None
            key = (mapping.exporter, uuid or f"{host}#{index}")
            info = meta.get(key)
            if info is None:
                info = meta[key] = {"key": key, "host": host, "uuid": uuid, "index": None, "model": None,
                                    "exporter": mapping.exporter, "at": None, "timed": None}
        if info["index"] is None and mapping.index_label:  # nvidia_smi: on its info series only
            info["index"] = _index(labels.get(mapping.index_label))
        if info["model"] is None and mapping.model_label:
            info["model"] = labels.get(mapping.model_label) or None
        if timed:
            info["timed"] = sample.value
            continue
        info["at"] = max(info["at"] or 0.0, sample.at)
        field = mapping.fields.get(sample.name)
        if field is not None:
            name, factor = field
            fields.setdefault(info["key"], {})[name] = None if sample.value is None else sample.value * factor
    records = []
    for key, info in meta.items():
        values = fields.get(key)
        if values is None:
            continue  # only a timestamp or an info series: no GPU reading
        records.append(FleetGpu(host=info["host"], index=info["index"], uuid=info["uuid"], model=info["model"],
                                exporter=info["exporter"], sampled_at=info["timed"] or info["at"], **values))
    return records


def _timed_mapping(labels: Mapping[str, str]) -> ExporterMapping | None:
    """The mapping of a ``timestamp()`` series (PromQL drops its name): the one whose UUID
    label it has (``UUID``: dcgm-exporter, ``uuid``: nvidia_gpu_exporter)."""
    for mapping in MAPPINGS:
        if mapping.uuid_label in labels:
            return mapping
    return None


class FleetState:
    """The fleet across readings (pure; the caller passes times in): each answer's records
    replace those GPUs' and servers' last ones; GPUs and servers missing from it keep theirs
    and age.

    ``interval_s``: optui's query interval; a GPU or server is stale once its newest sample is
    older than ``STALE_INTERVALS`` x max(interval_s, the gap between its last two distinct
    samples, or :data:`UNKNOWN_GAP_S` before there were two)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._last: dict[str, FleetGpu] = {}
        self._servers: dict[str, FleetServer] = {}
        self._gap: dict[str, float] = {}

    def stale_after_s(self, key: str) -> float:
        """Seconds without a new sample after which GPU or server ``key`` is stale."""
        return STALE_INTERVALS * max(self.interval_s, self._gap.get(key, UNKNOWN_GAP_S))

    def update(self, samples: list[PromSample], now: float) -> FleetSnapshot:
        """Merge one answer (taken at local unix time ``now``) and return the snapshot."""
        self._merge(self._servers, servers_from_samples(samples))
        self._merge(self._last, records_from_samples(samples))
        return self._snapshot(now, None, len(samples))

    def _merge(self, last: dict, records) -> None:
        for record in records:
            old = last.get(record.key)
            if old is not None and old.sampled_at and record.sampled_at and record.sampled_at > old.sampled_at:
                self._gap[record.key] = record.sampled_at - old.sampled_at
            last[record.key] = record

    def failed(self, message: str, now: float) -> FleetSnapshot:
        """A reading that failed (``message`` says why): the last known GPUs and servers, aging."""
        return self._snapshot(now, message, 0)

    def _aged(self, records, now: float) -> list:
        out = []
        for record in records:
            age = None if record.sampled_at is None else max(0.0, now - record.sampled_at)
            out.append(replace(record, age_s=age, stale=age is not None and age > self.stale_after_s(record.key)))
        return out

    def _snapshot(self, now: float, error: str | None, series: int) -> FleetSnapshot:
        gpus = self._aged(self._last.values(), now)
        gpus.sort(key=lambda g: (g.host, g.index if g.index is not None else 1 << 30, g.uuid))
        servers = self._aged(self._servers.values(), now)
        servers.sort(key=lambda srv: (srv.host, srv.instance, srv.job))
        return FleetSnapshot(tuple(gpus), now, error, series, tuple(servers))

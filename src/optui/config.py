"""``optui.toml``: hosts, servers, benchmarks, UI settings — validated with clear errors.

A bad file raises :class:`ConfigError` whose message is ``FILE:LINE: FIELD: what is wrong``
(e.g. ``optui.toml:16: servers.qwen.ready_timeout_s: Input should be a valid number (got '15m')``).
No file at all is valid: the local host, no servers, no benchmarks.

Example::

    theme = "optui-dark"
    [hosts.local]
    gpu_source = "nvml"            # nvml | nvidia-smi | demo | none

    [servers.qwen]
    url = "http://127.0.0.1:30000"
    kind = "sglang"                # sglang | vllm | llamacpp | openai
    control = "process"            # process | systemd | script | none
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "/m", "--tp-size", "4"]

    [servers.qwen.presets.big-batch]
    set = { "--max-running-requests" = "256" }
    unset = ["--disable-cuda-graph"]

    [benchmarks.c1]
    server = "qwen"
    argv = ["python", "-m", "sglang.bench_serving", "--max-concurrency", "1"]
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AllowInfNan,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from optui.config_file import (  # noqa: F401  (re-exported: optui.config is the public place)
    CONFIG_FILE_NAME,
    ENV_CONFIG,
    STATE_DIR_NAME,
    ConfigError,
    FieldError,
    default_state_dir,
    find_config,
    find_line,
    format_validation,
    index_toml_lines,
    journal_path_for,
    load_toml,
    read_config_text,
)


class _Model(BaseModel):
    # strict: a number is a TOML number (``true`` or ``"1"`` is refused, not converted)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


#: A finite real number (a TOML int or float; ``inf`` and ``nan`` refused: a timeout of inf
#: would make a restart or a stop wait forever). Every number below also has bounds.
Real = Annotated[float, AllowInfNan(False)]
#: A real number where ``inf`` means "no limit" (a request rate); ``nan`` fails its ``gt`` bound.
RealOrInf = Annotated[float, AllowInfNan(True)]
DAY_S = 86_400.0
#: Concurrency of a benchmark point (requests in flight).
Concurrency = Annotated[int, Field(ge=1, le=10_000)]
#: Tokens per prompt / per output of the built-in generator: it builds its prompts in memory
#: (3,000,000 froze the window for 1.9 s); longer prompts need an external client.
MAX_TOKENS = 262_144
#: Names of hosts, servers and benchmarks name files under ``.optui/`` (pidfile, lock, log).
NAME_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")


def check_names(section: str, value):
    """Refuse a ``[section.NAME]`` whose NAME is not letters, digits, ``-_.`` (not starting
    with ``.``, at most 64 characters): ``../../x`` would put its files outside ``.optui/``.
    Raises the located error; returns ``value`` unchanged."""
    if isinstance(value, dict):
        for name in value:
            if not NAME_RE.fullmatch(str(name)):
                raise FieldError((section, str(name)), f"bad name {name!r}: use at most 64 letters, digits, '-', '_' "
                                f"and '.' (not first): it names files under .optui/")
    return value


class HostConfig(_Model):
    """One host of the rack. ``local`` needs no entry."""

    ssh: str | None = Field(None, description="ssh alias or user@host[:port]; None = this machine")
    known_hosts: str | None = Field(None, description="known_hosts file (default ~/.ssh/known_hosts)")
    ssh_config: str | None = Field(None, description="ssh_config file (default ~/.ssh/config)")
    identity_file: str | None = Field(None, description="private key to use (default: ssh_config / agent)")
    nvidia_smi: str = Field("nvidia-smi", description="the nvidia-smi program on that host")
    gpu_source: Literal["nvml", "nvidia-smi", "demo", "replay", "none"] | None = None
    interval_s: Real | None = Field(None, ge=0.25, le=60, description="GPU refresh; default: refresh_s")
    demo_gpus: int = Field(8, ge=1, le=16, description="GPUs of a simulated (demo) host")
    demo_state: str | None = Field(None, description="demo only: state file of a simulated server on this host")
    replay_file: str | None = Field(None, description="gpu_source = 'replay': a saved nvidia-smi --query-gpu capture")
    fields: list[str] | None = Field(None, min_length=1, max_length=64,
                                     description="gpu_source = 'replay': the --query-gpu= fields of a header-less "
                                                 "replay_file, in order (default: a header, else a known layout)")

    @model_validator(mode="after")
    def _check_replay(self) -> HostConfig:
        if self.gpu_source == "replay" and not self.replay_file:
            raise ValueError("gpu_source = 'replay' needs replay_file (a saved nvidia-smi --query-gpu capture)")
        if self.fields is not None:
            if self.gpu_source != "replay":
                raise ValueError("fields is for gpu_source = 'replay' (the fields of its replay_file)")
            bad = [f for f in self.fields if not f.strip() or "," in f]
            if bad:
                raise ValueError(f"fields: each entry is one --query-gpu field name, got {bad[0]!r}")
        return self

    @property
    def source(self) -> str:
        """The effective GPU source: nvml for local hosts, nvidia-smi for SSH hosts."""
        if self.gpu_source:
            return self.gpu_source
        return "nvidia-smi" if self.ssh else "nvml"


class Preset(_Model):
    """A named flag set: flags to set (``None`` value = boolean flag) and to remove."""

    set: dict[str, str | list[str] | None] = Field(default_factory=dict)
    unset: list[str] = Field(default_factory=list)
    description: str = ""


class ServerConfig(_Model):
    """One inference server: where it answers, how it is controlled, how it is launched."""

    url: str
    host: str = "local"
    kind: Literal["sglang", "vllm", "llamacpp", "openai"] = "sglang"
    control: Literal["process", "systemd", "script", "none"] = "process"
    argv: list[str] = Field(default_factory=list)
    unit: str | None = None
    systemd_user: bool = False
    script: str | None = None
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    log_file: str | None = None
    api_key_env: str | None = None
    model: str | None = None
    autostart: bool = False
    ready_timeout_s: Real = Field(900.0, gt=0, le=7 * DAY_S)
    stop_timeout_s: Real = Field(30.0, gt=0, le=3600)
    health_timeout_s: Real = Field(25.0, gt=0, le=3600)
    poll_interval_s: Real = Field(2.0, ge=0.1, le=3600)
    hung_after_s: Real = Field(30.0, gt=0, le=DAY_S)
    stability_s: Real = Field(0.0, ge=0, le=DAY_S)
    generate_probe: bool = False
    rollback: Literal["offer", "auto", "off"] = "offer"
    #: a process of the old server still running after its stop (a child that left its
    #: process group): "refuse" the restart naming it, or "kill" it (SIGKILL) and go on
    leftovers: Literal["refuse", "kill"] = "refuse"
    presets: dict[str, Preset] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError(f"must be an http(s) URL like http://127.0.0.1:30000, got {value!r}")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _check_control(self) -> ServerConfig:
        if self.control == "process" and not self.argv:
            raise ValueError("control = 'process' needs argv (the launch command as a list)")
        if self.control == "systemd" and not self.unit:
            raise ValueError("control = 'systemd' needs unit (e.g. 'sglang.service')")
        if self.control == "script" and not self.script:
            raise ValueError("control = 'script' needs script (path of the launch script)")
        return self


class SharedPrefix(_Model):
    """``prefix = { shared_tokens = N }``: every prompt of a run starts with one N-token system prompt."""

    shared_tokens: int = Field(ge=1, le=MAX_TOKENS)


class DatasetPrompts(_Model):
    """``prefix = { dataset = "prompts.jsonl" }``: prompts from a file (whatever prefixes they share)."""

    dataset: str = Field(min_length=1, description="one prompt a line: {\"prompt\": ...}, a JSON string or text")


def _prefix_kind(value) -> str | None:
    if isinstance(value, str):
        return "tag:none" if value == "none" else None
    if isinstance(value, dict):
        return "tag:shared" if "shared_tokens" in value else "tag:dataset" if "dataset" in value else None
    tags: dict[type, str] = {SharedPrefix: "tag:shared", DatasetPrompts: "tag:dataset"}
    return tags.get(type(value))


#: The builtin generator's ``prefix``: "none", a shared system prompt or a dataset (tags: the
#: member a value is checked against, so an error names only that member's problem).
PrefixSharing = Annotated[
    Annotated[Literal["none"], Tag("tag:none")] | Annotated[SharedPrefix, Tag("tag:shared")]
    | Annotated[DatasetPrompts, Tag("tag:dataset")],
    Discriminator(_prefix_kind, custom_error_type="prefix",
                  custom_error_message='must be "none", { shared_tokens = N } or { dataset = "FILE" }'),
]


class BuiltinBench(_Model):
    """The built-in load generator (no tool needed on the GPU host).

    ``prefix`` states the intended prefix sharing: ``"none"`` (no two prompts share a first
    token), a shared system prompt, or a dataset. ``seed`` None: every run draws fresh
    prompts; a number reproduces a recorded run (point k of a sweep uses ``seed + k``).
    """

    concurrency: list[Concurrency] = Field(default_factory=lambda: [1], min_length=1, max_length=1000)
    input_len: int = Field(128, ge=1, le=MAX_TOKENS)
    output_len: int = Field(128, ge=1, le=MAX_TOKENS)
    prompts: int = Field(32, ge=1, le=1_000_000)
    request_rate: RealOrInf = Field(math.inf, gt=0, description="req/s; inf: all at once")
    endpoint: Literal["completions", "chat"] = "completions"
    ignore_eos: bool = True
    warmup: int = Field(1, ge=0, le=10_000)
    random_lengths: bool = False
    model: str | None = None
    prefix: PrefixSharing = "none"
    seed: int | None = Field(None, ge=0, le=2**31 - 1, description="None: fresh prompts every run")

    @field_validator("concurrency", mode="before")
    @classmethod
    def _one_or_many(cls, value):
        return [value] if isinstance(value, int) else value

    @model_validator(mode="after")
    def _prefix_fits(self) -> BuiltinBench:
        if isinstance(self.prefix, SharedPrefix) and self.prefix.shared_tokens >= self.input_len:
            raise ValueError(f"prefix.shared_tokens ({self.prefix.shared_tokens}) must be less than input_len "
                             f"({self.input_len}): every prompt needs at least one token of its own")
        return self


class SweepConfig(_Model):
    """The default sweep of a preset (the ``s`` key): one result per point."""

    concurrency: list[Concurrency] | None = Field(None, max_length=1000,
                                                  description="--max-concurrency values, e.g. [1, 2, 4, 8, 16]")
    request_rate: list[Annotated[RealOrInf, Field(gt=0)]] | None = Field(
        None, max_length=1000, description="--request-rate values in req/s (inf allowed)")

    @model_validator(mode="after")
    def _one_knob(self) -> SweepConfig:
        if (self.concurrency is None) == (self.request_rate is None):
            raise ValueError("give exactly one of concurrency or request_rate")
        values = self.concurrency or self.request_rate or []
        if not values or any(v <= 0 for v in values):
            raise ValueError("sweep values must be a non-empty list of numbers > 0")
        return self


class BenchmarkConfig(_Model):
    """A benchmark preset: an external command (``argv``) or the built-in generator."""

    server: str
    host: str = Field("local", description="where an argv command runs (a [hosts.NAME]); output streams back live")
    argv: list[str] | None = None
    builtin: BuiltinBench | None = None
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    stall_s: Real = Field(120.0, gt=0, le=7 * DAY_S, description="no output for this long while the server is unhealthy: stalled")
    silent_s: Real = Field(600.0, gt=0, le=7 * DAY_S, description="no output for this long even with a healthy server: stalled")
    description: str = ""
    sweep: SweepConfig | None = None
    repeat: int | None = Field(None, ge=1, le=50, description="runs per point of the repeat action (R) and of this "
                               "benchmark in an experiment (None: the top-level repeat)")
    max_failed_pct: Real | None = Field(None, ge=0, le=100, description="a run with more failed requests (in % of those "
                                        "sent) is degraded, never compared (None: the top-level max_failed_pct)")
    tool: Literal["auto", "sglang", "vllm"] = Field(
        "auto", description="which client argv runs (auto: from argv); decides how its result file is found")

    @model_validator(mode="after")
    def _one_kind(self) -> BenchmarkConfig:
        if (self.argv is None) == (self.builtin is None):
            raise ValueError("give exactly one of argv (a command) or builtin (the load generator)")
        if self.builtin is not None and self.host != "local":
            raise ValueError("host is for argv commands: the built-in load generator runs inside optui")
        return self


class TodoConfig(_Model):
    """``[todo]``: agents' lists to follow live and the in-progress warning.

    ``follow`` entries are ``KIND:PATH`` (kind claude | opencode | todowrite) or a bare
    path; an opencode DB path takes ``#SESSION`` (default: the newest session); a path may
    use ``~`` and globs (the newest match is followed).
    """

    follow: list[str] = Field(default_factory=list)
    poll_s: Real = Field(0.5, ge=0.1, le=60, description="how often followed files are checked")
    max_in_progress: int = Field(1, ge=0, le=10_000, description="warn when more items are in progress (0: never)")
    confirm_queue: bool = Field(True, description="X shows what each queued experiment restarts and asks first "
                                "(false: it starts at once; x on one item always asks)")

    @field_validator("follow")
    @classmethod
    def _check_follow(cls, value: list[str]) -> list[str]:
        from optui.core.todo.formats import parse_follow_spec

        for i, text in enumerate(value):
            try:
                parse_follow_spec(text)
            except ValueError as exc:
                raise FieldError(("todo", "follow", str(i)), f"{text!r}: {exc}") from None
        return value


class AgentConfig(_Model):
    """``[agent]``: what an agent (``optui mcp``) may do without the operator's approval.

    A restart an agent asks for is a request the operator approves or denies in optui, unless
    every flag it changes is in ``allowed_flags`` (then it runs at once); one that changes a
    flag in ``forbidden_flags`` is refused; past ``max_restarts_per_hour`` restarts by agents
    in the last hour, more are refused (0: none at all). An agent's benchmark is a request too,
    unless ``benchmarks_without_approval``.
    """

    allowed_flags: list[str] = Field(default_factory=list, description="flags an agent may change without approval")
    forbidden_flags: list[str] = Field(default_factory=list, description="flags an agent may never change")
    max_restarts_per_hour: int = Field(10, ge=0, le=10_000, description="restarts by agents in any hour")
    benchmarks_without_approval: bool = Field(False, description="an agent's benchmark runs without asking")

    @model_validator(mode="after")
    def _no_flag_both_allowed_and_forbidden(self) -> AgentConfig:
        from optui.core.agent.requests import policy_flag  # the names as the policy compares them

        allowed = {policy_flag(f.strip()) for f in self.allowed_flags}
        both = [f for f in self.forbidden_flags if policy_flag(f.strip()) in allowed]
        if both:
            raise FieldError(("agent", "forbidden_flags"), f"{', '.join(both)} also in allowed_flags: a flag is "
                                                          "either allowed or forbidden to an agent, not both")
        return self


class FleetConfig(_Model):
    """``[fleet]``: the GPU hosts a Prometheus already scrapes (dcgm-exporter / nvidia_gpu_exporter).

    ``prometheus`` is the HTTP API's base URL; ``bearer_token_env`` names the environment
    variable that holds a bearer token (the token itself is never in the file, never stored
    or logged); ``selector`` is a label selector (``{cluster="a"}``) added to every query;
    one query every ``interval_s`` seconds, each given up after ``timeout_s``. docs/fleet.md.
    """

    prometheus: str | None = Field(None, pattern=r"^https?://[^\s/]+", description="Prometheus HTTP API base URL")
    bearer_token_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                                         description="environment variable holding a bearer token")
    selector: str | None = Field(None, pattern=r"^\{.*\}$", description="label selector added to every query")
    interval_s: Real = Field(2.0, ge=0.25, le=300, description="seconds between queries")
    timeout_s: Real = Field(5.0, gt=0, le=60, description="a query not answered in this many seconds fails")
    demo_hosts: int | None = Field(None, ge=1, le=1024, description="demo only: simulated hosts x 8 GPUs, no Prometheus")

    @model_validator(mode="after")
    def _one_source(self) -> FleetConfig:
        if (self.prometheus is None) == (self.demo_hosts is None):
            raise ValueError("give prometheus = \"http://HOST:9090\" (or, for the demo, demo_hosts)")
        return self


class ExportConfig(_Model):
    """``[export]``: where experiments go as they end. ``mlflow``: an MLflow tracking URI
    (``http://host:5000``); each experiment is logged as one run when its benchmark
    finishes, its start fails or a verdict is recorded (needs ``pip install 'optui[mlflow]'``)."""

    mlflow: str | None = Field(None, pattern=r"^(https?|file|databricks|sqlite)://\S+$|^databricks$",
                               description="MLflow tracking URI each experiment is logged to as it ends")


class Config(_Model):
    """The whole ``optui.toml``."""

    theme: str = "optui-dark"
    journal: str | None = None
    refresh_s: Real = Field(1.0, ge=0.25, le=60)
    read_only: bool = False
    bell: bool = False
    log_max_lines: int = Field(10_000, ge=100, le=1_000_000)
    mem_alert_pct: Real = Field(95.0, gt=0, le=100)
    repeat: int = Field(3, ge=1, le=50, description="runs per benchmark point in an experiment and for R (verdicts need >= 3)")
    max_failed_pct: Real = Field(1.0, ge=0, le=100, description="failed requests above this % make a run degraded")
    keymap: dict[str, str] = Field(default_factory=dict)
    hosts: dict[str, HostConfig] = Field(default_factory=dict)
    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    benchmarks: dict[str, BenchmarkConfig] = Field(default_factory=dict)
    todo: TodoConfig = Field(default_factory=TodoConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    search: dict[str, dict] = Field(default_factory=dict, description="flag searches [search.NAME] (optui.core.search.spec checks them)")
    fleet: FleetConfig | None = None
    export: ExportConfig = Field(default_factory=ExportConfig)

    @field_validator("hosts", "servers", "benchmarks", mode="before")
    @classmethod
    def _check_names(cls, value, info):
        return check_names(info.field_name, value)

    @model_validator(mode="after")
    def _check_references(self) -> Config:
        hosts = set(self.hosts) | {"local"}
        for name, server in self.servers.items():
            if server.host not in hosts:
                raise FieldError(("servers", name, "host"), f"unknown host {server.host!r} (known: {', '.join(sorted(hosts))})")
        for name, bench in self.benchmarks.items():
            if bench.server not in self.servers:
                known = ", ".join(sorted(self.servers)) or "none configured"
                raise FieldError(("benchmarks", name, "server"), f"unknown server {bench.server!r} (known: {known})")
            if bench.host not in hosts:
                raise FieldError(("benchmarks", name, "host"), f"unknown host {bench.host!r} (known: {', '.join(sorted(hosts))})")
        return self

    def host_names(self) -> list[str]:
        """Configured hosts, ``local`` first when it is used or nothing else is configured."""
        names = list(self.hosts)
        uses_local = any(s.host == "local" for s in self.servers.values())
        if "local" not in names and (not names or uses_local):
            names.insert(0, "local")
        return names

    def repeat_of(self, bench: str) -> int:
        """Runs per point of benchmark preset ``bench``: its ``repeat``, else the top-level
        ``repeat`` (also for an unknown name)."""
        cfg = self.benchmarks.get(bench)
        return cfg.repeat if cfg is not None and cfg.repeat is not None else self.repeat

    def max_failed_pct_of(self, bench: str) -> float:
        """Failed-request threshold (in %) of preset ``bench``: its own, else the top-level one."""
        cfg = self.benchmarks.get(bench)
        return cfg.max_failed_pct if cfg is not None and cfg.max_failed_pct is not None else self.max_failed_pct

    def host(self, name: str) -> HostConfig:
        """The host's config (``local`` defaults when not configured)."""
        return self.hosts.get(name) or HostConfig()


class LoadedConfig:
    """A validated config plus where it came from.

    ``path`` is None when no file was found; ``journal_path`` is the campaign DB
    (``journal`` from the file, relative to the file; default ``.optui/optui.db`` beside
    the config, or the user's state dir without a config).
    """

    def __init__(self, config: Config, path: Path | None, journal_path: Path) -> None:
        self.config = config
        self.path = path
        self.journal_path = journal_path


def load_config(path: str | os.PathLike | None = None, *, search: bool = True) -> LoadedConfig:
    """Load and validate a config.

    ``path`` None and ``search`` True: use :func:`find_config`. Raises ConfigError with
    ``FILE:LINE: FIELD: problem`` lines for syntax or validation errors.
    """
    file = find_config(path) if (path or search) else None
    if file is None:
        config = Config()
        return LoadedConfig(config, None, default_state_dir() / "optui.db")
    config = parse_config_text(read_config_text(file), str(file))
    return LoadedConfig(config, file, journal_path_for(file, config.journal))


def parse_config_text(text: str, filename: str = CONFIG_FILE_NAME) -> Config:
    """Parse and validate TOML text; raises ConfigError naming ``filename:line``."""
    data = load_toml(text, filename)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation(exc, text, filename)) from None


def config_line(text: str, loc: tuple[str, ...]) -> int | str:
    """The line (1-based) of TOML ``text`` where key path ``loc`` (``("keymap", "app.zoom")``)
    or its nearest parent table is written (1 when none is)."""
    return find_line(index_toml_lines(text), loc)

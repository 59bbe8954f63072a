"""A real Prometheus for tests (Debian's ``prometheus`` package, ``/usr/bin/prometheus``), the
exporters it scrapes, and a proxy in front of it.

- :class:`DcgmExporters`: one real HTTP server on 127.0.0.1 per simulated host, each serving
  dcgm-exporter-format ``/metrics`` for 8 GPUs whose values change at every scrape (a scrape's
  values are a function of the host, the GPU and that host's scrape count, so a test can check
  a reading against what was served). A host can stop (its scrapes fail).
- :class:`Prometheus`: the server on a free port, a tmp storage dir, scrape_interval 1s,
  scraping those exporters; :func:`prometheus_binary` skips a test when it is not installed.
- :class:`PromProxy`: a tiny HTTP proxy to it that answers 401 without the right bearer token,
  can hold requests (a slow Prometheus) until released, or answer text that is not JSON.
"""

from __future__ import annotations

import http.client
import shutil
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.helpers.demo import free_port, stop_process_group

PROMETHEUS = "/usr/bin/prometheus"
GPUS_PER_HOST = 8
MODEL = "NVIDIA H200"
TOTAL_MIB = 143771.0


def prometheus_binary() -> str:
    """The Prometheus binary; skips the calling test when it is missing (apt-get install -y prometheus)."""
    path = PROMETHEUS if Path(PROMETHEUS).exists() else shutil.which("prometheus")
    if not path:
        pytest.skip("Prometheus not installed: apt-get install -y prometheus (Debian's package, /usr/bin/prometheus)")
    return path


def gpu_values(host: int, gpu: int, generation: int) -> dict[str, float]:
    """What host ``host``'s exporter serves for GPU ``gpu`` at its scrape number ``generation``
    (dcgm-exporter metric → value, in its units: MiB, %, °C, W)."""
    used = float(1000 * (host + 1) + 10 * gpu + generation)
    reserved = 512.0
    return {
        "DCGM_FI_DEV_FB_USED": used,
        "DCGM_FI_DEV_FB_FREE": TOTAL_MIB - used - reserved,
        "DCGM_FI_DEV_FB_RESERVED": reserved,
        "DCGM_FI_DEV_GPU_UTIL": float((generation + gpu) % 101),
        "DCGM_FI_DEV_MEM_COPY_UTIL": float((generation * 3 + gpu) % 101),
        "DCGM_FI_DEV_GPU_TEMP": float(30 + (generation + host) % 50),
        "DCGM_FI_DEV_POWER_USAGE": 100.0 + gpu + generation / 4,
    }


def host_name(host: int) -> str:
    return f"gpu-node-{host:03d}"


def gpu_uuid(host: int, gpu: int) -> str:
    return f"GPU-{host:08d}-0000-4000-8000-{gpu:012d}"


def dcgm_text(host: int, generation: int, omit: frozenset[str] = frozenset()) -> str:
    """dcgm-exporter's /metrics text for ``host``'s 8 GPUs (HELP/TYPE lines, its labels)."""
    lines = []
    per_metric: dict[str, list[str]] = {}
    for gpu in range(GPUS_PER_HOST):
        labels = (f'gpu="{gpu}",UUID="{gpu_uuid(host, gpu)}",pci_bus_id="00000000:{gpu + 0x18:02X}:00.0",'
                  f'device="nvidia{gpu}",modelName="{MODEL}",Hostname="{host_name(host)}",'
                  f'DCGM_FI_DRIVER_VERSION="570.124.06"')
        for metric, value in gpu_values(host, gpu, generation).items():
            if metric not in omit:
                per_metric.setdefault(metric, []).append(f"{metric}{{{labels}}} {value:g}")
    for metric, samples in per_metric.items():
        lines += [f"# HELP {metric} {metric}.", f"# TYPE {metric} gauge", *samples]
    return "\n".join(lines) + "\n"


SMI_MODEL = "NVIDIA A100-SXM4-80GB"
MIB = 1024 * 1024


def smi_uuid(gpu: int) -> str:
    """nvidia_gpu_exporter's uuid label: nvidia-smi's UUID without its ``GPU-`` prefix."""
    return f"5b6c7d8e-0000-4000-8000-{gpu:012d}"


def smi_values(gpu: int) -> dict[str, float]:
    """What the nvidia_gpu_exporter serves for GPU ``gpu`` (its metric → value in its base
    units: bytes, ratios 0-1, °C, W) and, under ``optui:<field>``, the value optui shows."""
    used, free, reserved = (20_000 + 1_000 * gpu) * MIB, (60_000 - 1_000 * gpu) * MIB, 553 * MIB
    util, mem_util = 0.25 + 0.5 * gpu, 0.125 * (gpu + 1)
    return {"nvidia_smi_memory_used_bytes": used, "nvidia_smi_memory_free_bytes": free,
            "nvidia_smi_memory_reserved_bytes": reserved, "nvidia_smi_utilization_gpu_ratio": util,
            "nvidia_smi_utilization_memory_ratio": mem_util, "nvidia_smi_temperature_gpu": 41.0 + gpu,
            "nvidia_smi_power_draw_watts": 88.5 + gpu,
            "optui:mem_used_mib": used / MIB, "optui:mem_free_mib": free / MIB, "optui:mem_reserved_mib": 553.0,
            "optui:util_gpu_pct": 100 * util, "optui:util_mem_pct": 100 * mem_util, "optui:temp_c": 41.0 + gpu,
            "optui:power_w": 88.5 + gpu}


def nvidia_smi_text(gpus: int) -> str:
    """nvidia_gpu_exporter's /metrics for ``gpus`` GPUs in its format (its METRICS.md: series
    named after nvidia-smi's query fields, labelled ``uuid`` only, base units; index and model
    name are labels of ``nvidia_smi_gpu_info``), with one field optui does not read."""
    lines = []
    for metric in (*[m for m in smi_values(0) if not m.startswith("optui:")], "nvidia_smi_fan_speed_ratio"):
        lines += [f"# HELP {metric} {metric}.", f"# TYPE {metric} gauge"]
        lines += [f'{metric}{{uuid="{smi_uuid(gpu)}"}} {float(smi_values(gpu).get(metric, 0.3))!r}' for gpu in range(gpus)]
    lines += ["# HELP nvidia_smi_gpu_info A metric with a constant '1' value labeled by gpu uuid, name, ... index.",
              "# TYPE nvidia_smi_gpu_info gauge"]
    lines += [f'nvidia_smi_gpu_info{{driver_version="550.54.15",name="{SMI_MODEL}",uuid="{smi_uuid(gpu)}",'
              f'pci_bus_id="00000000:{gpu + 7:02X}:00.0",compute_cap="8.0",index="{gpu}"}} 1' for gpu in range(gpus)]
    return "\n".join(lines) + "\n"


@dataclass
class _Exporter:
    host: int
    server: ThreadingHTTPServer
    generations: list[int] = field(default_factory=list)  # served, in order
    omit: frozenset[str] = frozenset()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"


class DcgmExporters:
    """``hosts`` simulated dcgm-exporters (see the module doc); ``omit``: host number → the
    metrics that host does not serve."""

    def __init__(self, hosts: int, omit: dict[int, frozenset[str]] | None = None) -> None:
        self.exporters: list[_Exporter] = []
        self._lock = threading.Lock()
        for host in range(hosts):
            exporter = _Exporter(host, ThreadingHTTPServer(("127.0.0.1", 0), self._handler(host)),
                                 omit=(omit or {}).get(host, frozenset()))
            exporter.server.daemon_threads = True
            threading.Thread(target=exporter.server.serve_forever, daemon=True).start()
            self.exporters.append(exporter)

    def _handler(self, host: int):
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                exporter = owner.exporters[host]
                with owner._lock:
                    generation = len(exporter.generations)
                    body = dcgm_text(host, generation, exporter.omit).encode()
                    exporter.generations.append(generation)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        return Handler

    def targets(self) -> list[str]:
        return [exporter.target for exporter in self.exporters]

    def served(self, host: int) -> list[int]:
        """The generations host ``host`` served so far."""
        with self._lock:
            return list(self.exporters[host].generations)

    def stop(self, host: int) -> None:
        """Host ``host``'s exporter stops (its port refuses: scrapes fail)."""
        server = self.exporters[host].server
        server.shutdown()
        server.server_close()

    def close(self) -> None:
        for exporter in self.exporters:
            exporter.server.shutdown()
            exporter.server.server_close()


class MetricsServer:
    """A real HTTP server on 127.0.0.1 answering ``/metrics`` with ``text()`` (an inference
    server's Prometheus text: vLLM's ``vllm:*``, SGLang's ``sglang:*``)."""

    def __init__(self, text) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                body = text().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Prometheus:
    """A running Prometheus scraping ``targets`` every second (see the module doc); ``jobs``:
    more (job name, target, its ``instance`` label) to scrape, e.g. inference servers placed on
    a simulated host (``gpu-node-000:8000``)."""

    root: Path
    targets: list[str]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    jobs: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> Prometheus:
        """Start it and wait until it is ready (its first scrapes come ~5 s later: its target
        discovery sends the static targets on a fixed 5 s tick)."""
        binary = prometheus_binary()
        config = self.root / "prometheus.yml"
        targets = ", ".join(f'"{t}"' for t in self.targets)
        text = ("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                f"scrape_configs:\n  - job_name: dcgm\n    static_configs:\n      - targets: [{targets}]\n")
        for job, target, instance in self.jobs:
            text += (f"  - job_name: {job}\n    static_configs:\n      - targets: [\"{target}\"]\n"
                     f"        labels: {{instance: \"{instance}\"}}\n")
        config.write_text(text)
        log = open(self.root / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={self.root / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {(self.root / 'prometheus.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("prometheus not ready in time")

    def wait_series(self, promql: str, count: int, timeout_s: float = 30.0) -> None:
        """Wait until instant query ``promql`` has ``count`` series (the first scrapes landed)."""
        import json
        import urllib.parse

        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        deadline = time.monotonic() + timeout_s
        found = None
        while time.monotonic() < deadline:
            with urllib.request.urlopen(url, timeout=5) as resp:
                found = len(json.load(resp)["data"]["result"])
            if found == count:
                return
            time.sleep(0.1)
        raise RuntimeError(f"{promql}: {found} series, not {count}")

    def stop(self) -> None:
        if self.proc is not None:
            stop_process_group(self.proc)
            self.proc = None


class PromProxy:
    """A proxy to ``upstream`` on 127.0.0.1 (see the module doc). ``token``: the bearer token
    it wants (None: any request passes); ``hold()``: requests wait (a slow Prometheus) until
    ``release()``; ``garbage``: answer 200 with text that is not JSON."""

    def __init__(self, upstream: str, token: str | None = None) -> None:
        self.upstream = upstream
        self.token = token
        self.garbage = False
        self._go = threading.Event()
        self._go.set()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner._go.wait(60)
                if owner.token is not None and self.headers.get("Authorization") != f"Bearer {owner.token}":
                    return self._answer(401, b"Unauthorized\n", "text/plain")
                if owner.garbage:
                    return self._answer(200, b"<html>a login page</html>", "text/html")
                host = owner.upstream.split("//", 1)[1]
                conn = http.client.HTTPConnection(host, timeout=10)
                conn.request("POST", self.path, body, {"Content-Type": self.headers.get("Content-Type", "")})
                resp = conn.getresponse()
                self._answer(resp.status, resp.read(), resp.getheader("Content-Type", ""))
                conn.close()

            def _answer(self, status: int, body: bytes, ctype: str) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client gave up (a timeout test)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def hold(self) -> None:
        self._go.clear()

    def release(self) -> None:
        self._go.set()

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()

"""A simulated SGLang server for ``optui demo`` and tests: ``python -m optui.demo.fake_server``.

Lifecycle like SGLang 0.5.23 (``servers_and_bench.md`` 1.1): while the startup phases run
(:mod:`optui.demo.startup`) nothing listens (connection refused); then HTTP starts and
``/health`` answers 503 during a warmup of ``max(1 s / demo-speed, 0.3 s)``, then 200. The
log goes to stderr in SGLang's format (uvicorn access lines included, so one file holds
everything in order).

Environment:
- ``OPTUI_DEMO_STATE=PATH``: every 250 ms write the simulated GPU state there as JSON
  (atomically; removed on exit): ``pid``, ``phase``, ``hung``, ``tp_size``,
  ``mem_used_mib_per_gpu`` (MiB), ``util_pct`` (0-100), ``running``, ``queued``,
  ``gen_throughput`` (tok/s), ``ts`` (unix seconds).
- ``OPTUI_DEMO_HANG_AFTER=N``: N seconds after ready the scheduler stops producing tokens;
  requests stay running, ``/health`` stays 200 for ``SGLANG_HEALTH_CHECK_TIMEOUT``
  (default 20) seconds, like SGLang's health check needing that long to fail, then 503.
- ``OPTUI_DEMO_API_KEY=KEY``: the API key when ``--api-key`` is not given (like vLLM's
  ``VLLM_API_KEY``): a key that comes from the environment, never from the argv.
- ``OPTUI_DEMO_IGNORE=--flag[,--flag...]``: accept these flags but do not apply them (they
  keep their defaults, and ``/server_info`` shows what really runs): a server that does not
  run the argv it was given.

SIGTERM/SIGINT: uvicorn's shutdown lines, exit 0 within a second.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import threading
import time
import urllib.request

from optui.demo.http_api import DemoHTTPServer
from optui.demo.responses import health_failure_line
from optui.demo.scheduler import CostModel, Scheduler
from optui.demo.server_args import parse_args
from optui.demo.sim_log import SimLog
from optui.demo.startup import Interrupted, LiveState, MemoryPlan, Startup, StartupFailed

_STATE_INTERVAL_S = 0.25


def _env_float(name: str, default: float | None) -> float | None:
    try:
        return float(os.environ[name])
    except (KeyError, ValueError):
        return default


class Runtime:
    """The running demo server: args, log, simulated GPU state, scheduler, HTTP status.

    ``status``: "loading" (no HTTP) → "starting" (HTTP up, warming up) → "up" → "shutdown".
    """

    def __init__(self, args, argv: list[str]) -> None:
        self.args = args
        self.log = SimLog()
        self.live = LiveState()
        self.stop = threading.Event()
        self.signal_name = "SIGTERM"  # the signal that set ``stop``
        self.status = "loading"
        self.plan = MemoryPlan.from_args(args)
        self.scheduler: Scheduler | None = None
        self.started_wall = time.time()
        self.started_mono = time.monotonic()
        self.startup_time_s: float | None = None
        self.launch_command = shlex.join(["python", "-m", "sglang.launch_server", *argv])
        self.health_timeout_s = _env_float("SGLANG_HEALTH_CHECK_TIMEOUT", 20.0) or 20.0
        self.hang_after_s = _env_float("OPTUI_DEMO_HANG_AFTER", None)
        self.state_path = os.environ.get("OPTUI_DEMO_STATE") or None
        if args.api_key is None:
            args.api_key = os.environ.get("OPTUI_DEMO_API_KEY") or None

    # --------------------------------------------------------------- health
    def health(self) -> tuple[bool, str | None]:
        """(healthy, log line or None) for ``/health`` and ``/health_generate``."""
        if self.status == "shutdown":
            return False, "Health check request received during shutdown. Returning 503."
        if self.status != "up" or self.scheduler is None:
            return False, None
        sched = self.scheduler
        if sched.hung and sched.hang_at is not None and time.monotonic() - sched.hang_at >= self.health_timeout_s:
            hang_wall = self.started_wall + (sched.hang_at - self.started_mono)
            return False, health_failure_line(hang_wall, self.health_timeout_s)
        return True, None

    # ---------------------------------------------------------- GPU state
    def _monitor(self) -> None:
        """Update utilization every 250 ms and write the state file when asked to."""
        last_busy, last_t = 0.0, time.monotonic()
        while not self.stop.wait(_STATE_INTERVAL_S):
            sched = self.scheduler
            if sched is not None and self.status in ("starting", "up"):
                now, busy = time.monotonic(), sched.counters.busy_s
                load = sched.load()
                frac = min(1.0, (busy - last_busy) / max(now - last_t, 1e-6))
                last_busy, last_t = busy, now
                if sched.hung and load["running"]:
                    self.live.util_pct = 100.0  # a stuck kernel spins: busy GPU, no tokens
                else:
                    scale = 60.0 + 40.0 * min(1.0, load["running"] / 32)
                    self.live.util_pct = round(frac * scale, 1)
            self._write_state()

    def state(self) -> dict:
        """The state-file object (see module docstring)."""
        sched = self.scheduler
        load = sched.load() if sched else {"running": 0, "queued": 0}
        return {
            "pid": os.getpid(),
            "phase": self.live.phase,
            "hung": bool(sched and sched.hung),
            "tp_size": self.args.tp_size,
            "mem_used_mib_per_gpu": round(self.live.mem_used_mib, 1),
            "util_pct": self.live.util_pct,
            "running": load["running"],
            "queued": load["queued"],
            "gen_throughput": round(sched.counters.gen_throughput, 2) if sched else 0.0,
            "ts": time.time(),
        }

    def _write_state(self) -> None:
        if not self.state_path:
            return
        tmp = f"{self.state_path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(self.state(), fh)
            os.replace(tmp, self.state_path)
        except OSError:
            pass  # a missing directory must not stop the server

    def remove_state(self) -> None:
        for path in (self.state_path, f"{self.state_path}.{os.getpid()}.tmp"):
            if path:
                try:
                    os.unlink(path)
                except OSError:
                    pass

    # --------------------------------------------------------------- serve
    def serve(self) -> int:
        """Run the whole lifecycle; return the exit code."""
        a, log = self.args, self.log
        self._write_state()
        threading.Thread(target=self._monitor, name="state", daemon=True).start()
        try:
            self.plan = Startup(a, log, self.live, self.stop).run()
        except StartupFailed as exc:
            return exc.exit_code
        except Interrupted:
            log.main(f"Received {self.signal_name} during startup. Exiting.")
            return 0
        cost = CostModel(a.tp_size, 0 if a.disable_cuda_graph else a.cuda_graph_max_bs)
        self.scheduler = Scheduler(
            log, max_running=a.max_running_requests, chunked_prefill=a.chunked_prefill_size,
            max_total_tokens=self.plan.kv_tokens, cost=cost, radix_cache=not a.disable_radix_cache,
            decode_log_interval=a.decode_log_interval, noise=a.demo_noise, noise_seed=a.demo_noise_seed,
        )
        self.scheduler.start()
        self.live.phase = "http_up"
        log.uvicorn(f"Started server process [{os.getpid()}]")
        log.uvicorn("Waiting for application startup.")
        log.uvicorn("Application startup complete.")
        try:
            httpd = DemoHTTPServer((a.host, a.port), self)
        except OSError as exc:
            reason = (exc.strerror or str(exc)).lower()
            log.uvicorn(f"[Errno {exc.errno}] error while attempting to bind on address ('{a.host}', {a.port}): {reason}", "ERROR")
            log.uvicorn("Waiting for application shutdown.")
            log.uvicorn("Application shutdown complete.")
            self.scheduler.stop()
            return 1
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        log.uvicorn(f"Uvicorn running on http://{a.host}:{a.port} (Press CTRL+C to quit)")
        self.status, self.live.phase = "starting", "warmup"
        if not self._warmup():
            code = 0 if self.stop.is_set() else 1
            self._shutdown(httpd)
            return code
        self.status, self.live.phase = "up", "ready"
        self.startup_time_s = round(time.monotonic() - self.started_mono, 3)
        if self.hang_after_s is not None:
            self.scheduler.hang_at = time.monotonic() + self.hang_after_s
        log.main("The server is fired up and ready to roll!")
        self.stop.wait()
        self._shutdown(httpd)
        return 0

    def _warmup(self) -> bool:
        """SGLang's warmup: GET /model_info and an 8-token POST /generate over HTTP, during
        at least ``max(1 s / speed, 0.3 s)``. False on SIGTERM or a failed request."""
        a = self.args
        started = time.monotonic()
        if not a.skip_server_warmup:
            host = "127.0.0.1" if a.host in ("0.0.0.0", "", "::") else a.host
            base = f"http://{host}:{a.port}"
            headers = {"Authorization": f"Bearer {a.api_key}"} if a.api_key else {}
            body = {"text": "The capital city of France is", "sampling_params": {"temperature": 0, "max_new_tokens": 8}}
            try:
                for path, data in (("/model_info", None), ("/generate", json.dumps(body).encode())):
                    req = urllib.request.Request(base + path, data=data, headers={**headers, "Content-Type": "application/json"})
                    with urllib.request.urlopen(req, timeout=30) as resp:
                        resp.read()
            except Exception as exc:  # noqa: BLE001 - any warmup failure kills the server, like SGLang
                if self.stop.is_set():
                    return False
                self.log.main(f"Initialization failed. warmup error: {exc!r}")
                return False
        left = max(1.0 / a.demo_speed, 0.3) - (time.monotonic() - started)
        return not self.stop.wait(max(0.0, left))

    def _shutdown(self, httpd: DemoHTTPServer) -> None:
        self.status, self.live.phase = "shutdown", "shutdown"
        self.log.uvicorn("Shutting down")
        httpd.shutdown()
        if self.scheduler:
            self.scheduler.stop()
        self.log.uvicorn("Waiting for application shutdown.")
        self.log.uvicorn("Application shutdown complete.")
        self.log.uvicorn(f"Finished server process [{os.getpid()}]")
        httpd.server_close()


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code (2 for bad flags, via argparse)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv, os.environ.get("OPTUI_DEMO_IGNORE", ""))
    runtime = Runtime(args, argv)

    def on_signal(signum: int, _frame) -> None:
        runtime.signal_name = signal.Signals(signum).name
        runtime.stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    try:
        return runtime.serve()
    finally:
        runtime.stop.set()
        runtime.remove_state()


if __name__ == "__main__":
    sys.exit(main())

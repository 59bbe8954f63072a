#!/usr/bin/env python3
"""Small measuring helpers for ``bench/real_gpu/run.sh`` (stdlib only; every wait bounded).

    probe.py health URL                       -> {"status": 200|503|null, "body": ...}
    probe.py wait-ready URL [--timeout S]     -> waits for /health 200; {"ready": bool, "waited_s"}
    probe.py metrics URL [--window S]         -> llama.cpp /metrics counters, and their rates over S seconds
    probe.py pid STATE_DIR NAME               -> the pid in optui's pidfile STATE_DIR/servers/NAME.json
    probe.py gpu-pair --optui CMD... [--url URL] [--until-ready] [--max N]
                                              -> `optui gpus --json` and `nvidia-smi --query-gpu` run at the
                                                 same moment, one JSON line per sample with the difference
    probe.py serve-watch --url URL [--while-pid PID] [--samples N] --optui CMD...
                                              -> while a benchmark runs: `optui status --json --wait 2` and two
                                                 /metrics scrapes over the same 2 s, plus a gpu-pair, per sample
    probe.py smi-mem                          -> {"mem_used_mib": [...]} from nvidia-smi (null without it)
    probe.py summary STEPS_DIR                -> the campaign's key figures as JSON (from the steps' outputs)

Memory is MiB, times are seconds, rates per second. Nothing here changes a server.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

SMI_FIELDS = "index,memory.used,memory.total,memory.reserved,utilization.gpu,power.draw"


def health(url: str, timeout_s: float = 2.0) -> dict:
    """GET url/health: ``{"status": code or None (no answer), "body": first 200 chars}``."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout_s) as resp:
            return {"status": resp.status, "body": resp.read(200).decode(errors="replace")}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code, "body": exc.read(200).decode(errors="replace")}
    except (urllib.error.URLError, OSError) as exc:
        return {"status": None, "body": str(exc)[:200]}


def wait_ready(url: str, timeout_s: float) -> dict:
    """Poll /health every 0.1 s until 200 or ``timeout_s``."""
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < timeout_s:
        last = health(url)
        if last["status"] == 200:
            return {"ready": True, "waited_s": round(time.monotonic() - t0, 3)}
        time.sleep(0.1)
    return {"ready": False, "waited_s": round(time.monotonic() - t0, 3), "last": last}


_SAMPLE = re.compile(r"^(llamacpp:[a-z_]+)(?:\{[^}]*\})?\s+(\S+)$")


def scrape(url: str) -> dict[str, float]:
    """The ``llamacpp:*`` samples of url/metrics (empty when it does not answer 200)."""
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=3) as resp:
            text = resp.read().decode(errors="replace")
    except (urllib.error.URLError, OSError):
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        if m := _SAMPLE.match(line.strip()):
            try:
                out[m.group(1)] = float(m.group(2))
            except ValueError:
                pass
    return out


def metrics(url: str, window_s: float) -> dict:
    """Two scrapes ``window_s`` apart: the second's values and each counter's rate."""
    t0, a = time.time(), scrape(url)
    time.sleep(window_s)
    t1, b = time.time(), scrape(url)
    dt = t1 - t0
    rates = {k: round((b[k] - a[k]) / dt, 2) for k in b if k.endswith("_total") and k in a}
    return {"t": round(t1, 3), "window_s": round(dt, 3), "values": b, "rates_per_s": rates}


def pidfile_pid(state_dir: str, name: str) -> int | None:
    """The pid optui recorded for server ``name`` (None when there is no readable pidfile)."""
    try:
        return int(json.loads((Path(state_dir) / "servers" / f"{name}.json").read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _smi_rows(out: str) -> list[dict]:
    rows = []
    for line in out.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(SMI_FIELDS.split(",")):
            continue

        def num(s: str) -> float | None:
            try:
                return float(s)
            except ValueError:
                return None  # [N/A], [Not Supported]

        rows.append(dict(zip(("index", "mem_used_mib", "mem_total_mib", "mem_reserved_mib", "util_gpu_pct", "power_w"),
                             (num(c) for c in cells))))
    return rows


def smi_mem() -> dict:
    """nvidia-smi's memory.used per GPU now, or an error without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return {"mem_used_mib": None, "error": "no nvidia-smi"}
    try:
        proc = subprocess.run(["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=15, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"mem_used_mib": None, "error": "nvidia-smi timed out"}
    return {"mem_used_mib": [r["mem_used_mib"] for r in _smi_rows(proc.stdout)], "rows": _smi_rows(proc.stdout)}


def gpu_pair(optui: list[str], url: str | None) -> dict:
    """One sample: ``optui gpus --json`` and nvidia-smi started together (+ /health)."""
    t = time.time()
    opt = subprocess.Popen([*optui, "gpus", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           stdin=subprocess.DEVNULL)
    smi = None
    if shutil.which("nvidia-smi"):
        smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    hs = health(url)["status"] if url else None
    sample: dict = {"t": round(t, 3), "health": hs}
    try:
        out, err = opt.communicate(timeout=20)
        parsed = json.loads(out) if out.strip() else {"error": err.strip()[-300:]}
    except (subprocess.TimeoutExpired, ValueError) as exc:
        opt.kill()
        parsed = {"error": f"optui gpus: {exc}"}
    if isinstance(parsed, list):
        sample["optui"] = [{k: g.get(k) for k in ("index", "mem_used_mib", "mem_reserved_mib", "mem_total_mib",
                                                  "util_gpu_pct", "power_w")} for g in parsed]
    else:
        sample["optui"] = parsed
    if smi is None:
        sample["smi"] = {"error": "no nvidia-smi"}
    else:
        try:
            out, _ = smi.communicate(timeout=20)
            sample["smi"] = _smi_rows(out)
        except subprocess.TimeoutExpired:
            smi.kill()
            sample["smi"] = {"error": "nvidia-smi timed out"}
    if isinstance(sample["optui"], list) and isinstance(sample["smi"], list):
        sample["mem_diff_mib"] = [None if a.get("mem_used_mib") is None or b["mem_used_mib"] is None
                                  else round(a["mem_used_mib"] - b["mem_used_mib"], 1)
                                  for a, b in zip(sample["optui"], sample["smi"])]
    return sample


def _alive(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def serve_watch(optui: list[str], url: str, while_pid: int | None, samples: int, window_s: float = 2.0):
    """Samples while ``while_pid`` lives: optui's live load next to the server's own counters
    over the same window, and the GPU pair. Yields one dict per sample."""
    for _ in range(samples):
        if not _alive(while_pid):
            return
        st = subprocess.Popen([*optui, "status", "--json", "--wait", str(window_s)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        m = metrics(url, window_s)
        try:
            out, err = st.communicate(timeout=30)
            data = json.loads(out)
            server = data["servers"][0] if data.get("servers") else {}
            load = {"state": server.get("state"), **server.get("load", {})}
        except (subprocess.TimeoutExpired, ValueError, KeyError, IndexError) as exc:
            st.kill()
            load = {"error": f"optui status: {exc}"}
        rates = m["rates_per_s"]
        yield {"t": m["t"], "optui_load": load,
               "server_counters": {"gen_tok_s": rates.get("llamacpp:tokens_predicted_total"),
                                   "prompt_tok_s": rates.get("llamacpp:prompt_tokens_total"),
                                   "requests_processing": m["values"].get("llamacpp:requests_processing"),
                                   "requests_deferred": m["values"].get("llamacpp:requests_deferred")},
               "gpu": gpu_pair(optui, url)}


def _step_text(steps: Path, name: str) -> str:
    files = sorted(steps.glob(f"[0-9][0-9]-{name}.txt"))
    return files[-1].read_text(errors="replace") if files else ""


def _first_object(text: str):
    """The first JSON object in ``text`` (a step's output may have lines before it), or None."""
    start = text.find("{")
    while start >= 0:
        try:
            return json.JSONDecoder().raw_decode(text[start:])[0]
        except ValueError:
            start = text.find("{", start + 1)
    return None


def _json_lines(text: str) -> list:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def _bench(r: dict) -> dict:
    points = []
    for run in r.get("runs", []):
        for res in run.get("results", []) or [{"status": run.get("status"), "error": run.get("error")}]:
            extra = res.get("extra") or {}
            points.append({"point": extra.get("point"), "status": res.get("status"), "error": res.get("error"),
                           "completed": res.get("completed"), "failed": res.get("failed"),
                           "out_tok_s": res.get("output_throughput_tok_s"),
                           "ttft_p50_ms": (res.get("ttft_ms") or {}).get("median"),
                           "tpot_p50_ms": (res.get("tpot_ms") or {}).get("median")})
    return {"experiment": r.get("experiment"), "points": points, "vs_baseline": r.get("experiment_summary")}


def summary(steps: Path) -> dict:
    """Key figures from what the steps printed (``steps/NN-name.txt``); a missing step is absent."""
    out: dict = {}
    for name in ("start", "restart-same", "restart-bigkv", "bad-flag", "oom", "restart-after-kill"):
        r = _first_object(_step_text(steps, name))
        if isinstance(r, dict):
            out[f"restart:{name}"] = {**{k: r.get(k) for k in ("state", "crash_class", "ready_s", "experiment", "lines")},
                                      "phases": {p["phase"]: round(p["t"], 3) for p in r.get("phases", [])}}
    for name in ("failures-bad-flag", "failures-oom", "failures-kill"):
        for ev in _json_lines(_step_text(steps, name)):  # the newest server.failed wins
            if ev.get("type") == "server.failed":
                d = ev.get("data", {})
                out[f"journal:{name}"] = {"seq": ev.get("seq"), "experiment": ev.get("experiment"), "class": d.get("class"),
                                          "message": d.get("message"), "phase": d.get("phase"),
                                          "lines": (d.get("lines") or [])[-3:]}
    for name in ("bench-sweep-baseline", "bench-gen", "bench-sweep-bigkv", "bench-during-kill"):
        r = _first_object(_step_text(steps, name))
        if isinstance(r, dict):
            out[f"bench:{name}"] = _bench(r)
    before = _first_object(_step_text(steps, "kv-mem-before")) or {}
    after = _first_object(_step_text(steps, "kv-mem-after")) or {}
    kv: dict = {"before_mib": before.get("mem_used_mib"), "after_mib": after.get("mem_used_mib")}
    if kv["before_mib"] and kv["after_mib"]:
        kv["delta_mib"] = [b - a for a, b in zip(kv["before_mib"], kv["after_mib"])]
    kv["server_log"] = [ln for ln in _step_text(steps, "kv-log").splitlines() if "KV buffer size" in ln or "n_slots =" in ln][-6:]
    kv["props"] = [_first_object(_step_text(steps, n)) for n in ("kv-props-before", "kv-props-after")]
    out["kv_cache_change"] = kv
    oom_lines = _step_text(steps, "oom-log").splitlines()
    out["oom_log"] = [ln for ln in oom_lines if "cudaMalloc" in ln][:2] or oom_lines[:3]
    for name in ("loading-gpus", "gpus-serving-idle"):
        samples = _json_lines(_step_text(steps, name))
        out[f"gpu_pairs:{name}"] = [{"t": s_["t"], "health": s_["health"],
                                     "optui_mib": [g.get("mem_used_mib") for g in s_["optui"]] if isinstance(s_["optui"], list) else s_["optui"],
                                     "smi_mib": [g.get("mem_used_mib") for g in s_["smi"]] if isinstance(s_["smi"], list) else s_["smi"],
                                     "diff_mib": s_.get("mem_diff_mib")} for s_ in samples]
    out["live_load"] = [{"t": s_["t"], "optui_gen_tok_s": s_["optui_load"].get("gen_tok_s"),
                         "server_gen_tok_s": s_["server_counters"]["gen_tok_s"],
                         "optui_running": s_["optui_load"].get("running"),
                         "server_running": s_["server_counters"]["requests_processing"],
                         "gpu_util_pct": [g.get("util_gpu_pct") for g in s_["gpu"]["optui"]] if isinstance(s_["gpu"].get("optui"), list) else None}
                        for s_ in _json_lines(_step_text(steps, "serve-watch"))]
    for name in ("tui", "tui-reattached"):
        r = _first_object(_step_text(steps, name))
        if isinstance(r, dict):
            out[f"tui:{name}"] = {k: r.get(k) for k in ("ready_seen_s", "screenshots", "quit", "error")} | {
                "pid": (r.get("server") or {}).get("pid"), "bench": {k: (r.get("bench") or {}).get(k) for k in ("name", "status")}}
    out["pids"] = {name: _step_text(steps, name).strip() for name in ("pid-before-tui", "pid-after-tui")}
    out["server_alive_after_tui_quit"] = '"status": 200' in _step_text(steps, "alive-after-tui-quit")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("health")
    s.add_argument("url")
    s = sub.add_parser("wait-ready")
    s.add_argument("url")
    s.add_argument("--timeout", type=float, default=60)
    s = sub.add_parser("metrics")
    s.add_argument("url")
    s.add_argument("--window", type=float, default=2.0)
    s = sub.add_parser("pid")
    s.add_argument("state_dir")
    s.add_argument("name")
    s = sub.add_parser("gpu-pair")
    s.add_argument("--url")
    s.add_argument("--until-ready", action="store_true", help="sample until /health is 200 (at most --max samples)")
    s.add_argument("--max", type=int, default=1)
    s.add_argument("--optui", nargs=argparse.REMAINDER, required=True, help="the optui command (last option)")
    s = sub.add_parser("serve-watch")
    s.add_argument("--url", required=True)
    s.add_argument("--while-pid", type=int)
    s.add_argument("--samples", type=int, default=4)
    s.add_argument("--optui", nargs=argparse.REMAINDER, required=True, help="the optui command (last option)")
    sub.add_parser("smi-mem")
    s = sub.add_parser("summary")
    s.add_argument("steps", type=Path)
    a = p.parse_args(argv)
    if a.cmd == "health":
        print(json.dumps(health(a.url)))
    elif a.cmd == "wait-ready":
        r = wait_ready(a.url, a.timeout)
        print(json.dumps(r))
        return 0 if r["ready"] else 1
    elif a.cmd == "metrics":
        print(json.dumps(metrics(a.url, a.window)))
    elif a.cmd == "pid":
        pid = pidfile_pid(a.state_dir, a.name)
        if pid is None:
            print(f"no pidfile for {a.name} in {a.state_dir}", file=sys.stderr)
            return 1
        print(pid)
    elif a.cmd == "gpu-pair":
        for _ in range(max(1, a.max)):
            sample = gpu_pair(a.optui, a.url)
            print(json.dumps(sample), flush=True)
            if not a.until_ready or sample["health"] == 200:
                break
    elif a.cmd == "serve-watch":
        for sample in serve_watch(a.optui, a.url, a.while_pid, a.samples):
            print(json.dumps(sample), flush=True)
    elif a.cmd == "smi-mem":
        print(json.dumps(smi_mem()))
    elif a.cmd == "summary":
        print(json.dumps(summary(a.steps), indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

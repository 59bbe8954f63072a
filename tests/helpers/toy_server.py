"""A tiny scriptable HTTP server for ready-gate tests: ``python -m tests.helpers.toy_server``.

``--port P`` (required), ``--ready-after S`` (/health 503 before), ``--health-delay S``
(each /health takes that long), ``--generate-after S`` (/v1/completions 503 before; -1 =
never works), ``--exit-after S --exit-code N`` (exit N that long after becoming ready),
``--stats FILE`` (writes ``{"max_inflight": n, "health_calls": n}`` of /health after each
call). Prints SGLang-style lines so the log classifier sees phases.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> int:
    p = argparse.ArgumentParser(prog="toy_server.py")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ready-after", type=float, default=0.0)
    p.add_argument("--health-delay", type=float, default=0.0)
    p.add_argument("--generate-after", type=float, default=0.0)
    p.add_argument("--exit-after", type=float, default=None)
    p.add_argument("--exit-code", type=int, default=3)
    p.add_argument("--stats", default=None)
    args = p.parse_args()
    t0 = time.monotonic()
    lock = threading.Lock()
    stats = {"inflight": 0, "max_inflight": 0, "health_calls": 0}
    print("[2025-01-15 10:00:00] server_args=ServerArgs(toy=True)", flush=True)
    print("[2025-01-15 10:00:00 TP0] Load weight begin. avail mem=78.90 GB", flush=True)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, code: int, body: bytes = b"") -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/health":
                with lock:
                    stats["inflight"] += 1
                    stats["health_calls"] += 1
                    stats["max_inflight"] = max(stats["max_inflight"], stats["inflight"])
                time.sleep(args.health_delay)
                with lock:
                    stats["inflight"] -= 1
                    if args.stats:
                        with open(args.stats + ".tmp", "w") as fh:
                            json.dump({k: stats[k] for k in ("max_inflight", "health_calls")}, fh)
                        os.replace(args.stats + ".tmp", args.stats)
                ready = time.monotonic() - t0 >= args.ready_after
                self._send(200 if ready else 503)
            elif self.path == "/v1/models":
                self._send(200, json.dumps({"data": [{"id": "toy"}]}).encode())
            else:
                self._send(404)

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            ok = args.generate_after >= 0 and time.monotonic() - t0 >= args.generate_after
            self._send(200 if ok else 503, b'{"choices":[{"text":"x"}]}' if ok else b"")

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    if args.ready_after:
        time.sleep(args.ready_after)
    print("[2025-01-15 10:00:01] The server is fired up and ready to roll!", flush=True)
    if args.exit_after is not None:
        time.sleep(args.exit_after)
        print("[2025-01-15 10:00:09] toy: exiting on purpose", flush=True)
        os._exit(args.exit_code)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())

"""The demo server's HTTP side: a stdlib ``ThreadingHTTPServer`` speaking SGLang's API.

Routes and status codes follow SGLang 0.5.23 (``servers_and_bench.md`` section 1.2).
Generation streams are SSE (``data: {...}\\n\\n`` ... ``data: [DONE]``) over chunked
transfer encoding, one event per token; OpenAI streams end with a chunk carrying
``finish_reason: "length"`` and ``usage`` (like llama.cpp, so clients count tokens exactly).
The handler talks to the server through ``runtime`` (:class:`optui.demo.fake_server.Runtime`).
"""

from __future__ import annotations

import http
import json
import queue
import random
import socketserver
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from optui.core.text.words import WORDS, count_tokens
from optui.demo import responses
from optui.demo.prefix_cache import prefix_hashes
from optui.demo.scheduler import SimRequest

_OPEN_PREFIXES = ("/health", "/metrics", "/ready")
_DEFAULT_MAX_TOKENS = {"completions": 16, "chat": 128, "generate": 128}


class ApiError(Exception):
    """An error answered as SGLang's OpenAI error body with ``status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class GenSpec:
    """A parsed generation request (token counts use the demo tokenizer: words;
    ``prefix_hashes`` identify the prompt's prefixes for the prefix cache)."""

    kind: str  # "completions" | "chat" | "generate"
    prompt_tokens: int
    max_new_tokens: int
    prefix_hashes: tuple[int, ...]
    stream: bool


def parse_generation(kind: str, body: dict, context_len: int) -> GenSpec:
    """Validate a request body of ``kind``; raise :class:`ApiError` (400) when bad."""
    if kind == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "messages must be a non-empty list")
        text = " ".join(_content_text(m.get("content")) for m in messages if isinstance(m, dict))
        max_new = body.get("max_completion_tokens", body.get("max_tokens"))
    elif kind == "completions":
        text = _prompt_text(body.get("prompt"))
        max_new = body.get("max_tokens")
    else:
        params = body.get("sampling_params") or {}
        text = _prompt_text(body.get("input_ids") if body.get("text") is None else body.get("text"))
        max_new = params.get("max_new_tokens") if isinstance(params, dict) else None
    max_new = _DEFAULT_MAX_TOKENS[kind] if max_new is None else max_new
    if not isinstance(max_new, int) or isinstance(max_new, bool) or max_new < 1:
        raise ApiError(400, f"max_tokens must be a positive integer, got {max_new!r}")
    prompt_tokens = max(1, count_tokens(text))
    if prompt_tokens + max_new > context_len:
        raise ApiError(
            400,
            f"Requested token count exceeds the model's maximum context length of {context_len} tokens. "
            f"You requested a total of {prompt_tokens + max_new} tokens: {prompt_tokens} tokens from the input "
            f"messages and {max_new} tokens for the completion. Please reduce the number of tokens in the input "
            "messages or the completion to fit within the limit.",
        )
    return GenSpec(kind, prompt_tokens, max_new, tuple(prefix_hashes(text.split())), bool(body.get("stream", False)))


def _prompt_text(prompt) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return " ".join(map(str, prompt))  # token ids: one "word" per id
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        return prompt[0]
    raise ApiError(400, "prompt/text must be a string or a list of token ids")


def _content_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class _Shapes:
    """Response bodies of one request: token chunks, final chunk, non-streaming body."""

    def __init__(self, spec: GenSpec, req: SimRequest, model: str) -> None:
        self.spec, self.req, self.model = spec, req, model
        self.created = int(time.time())
        self.text = ""
        self.count = 0  # tokens rendered so far
        self._rng = random.Random(req.rid)

    @property
    def finished(self) -> bool:
        return self.count >= self.spec.max_new_tokens

    def next_word(self) -> str:
        word = " " + self._rng.choice(WORDS)
        self.text += word
        self.count += 1
        return word

    def usage(self) -> dict:
        p, n = self.spec.prompt_tokens, self.count
        return {"prompt_tokens": p, "completion_tokens": n, "total_tokens": p + n}

    def _meta(self, finished: bool) -> dict:
        return {
            "id": self.req.rid,
            "finish_reason": {"type": "length", "length": self.count} if finished else None,
            "prompt_tokens": self.spec.prompt_tokens,
            "completion_tokens": self.count,
            "cached_tokens": self.req.cached_tokens,
            "e2e_latency": time.monotonic() - self.req.created,
        }

    def _openai(self, choice: dict, usage: dict | None, stream: bool) -> dict:
        chat = self.spec.kind == "chat"
        obj = ("chat.completion" if chat else "text_completion") + (".chunk" if stream and chat else "")
        return {"id": self.req.rid, "object": obj, "created": self.created, "model": self.model,
                "choices": [{"index": 0, **choice, "logprobs": None}], "usage": usage}

    def chunk(self, word: str, finished: bool = False) -> dict:
        """A streamed event for ``word`` (``finished``: the closing event)."""
        if self.spec.kind == "generate":
            return {"text": self.text, "meta_info": self._meta(finished), "index": 0}
        reason = "length" if finished else None
        body = {"delta": {"content": word} if word else {}} if self.spec.kind == "chat" else {"text": word}
        return self._openai({**body, "finish_reason": reason}, self.usage() if finished else None, True)

    def role_chunk(self) -> dict:
        return self._openai({"delta": {"role": "assistant", "content": ""}, "finish_reason": None}, None, True)

    def full(self) -> dict:
        """The non-streaming response body."""
        if self.spec.kind == "generate":
            return {"text": self.text, "meta_info": self._meta(True)}
        choice: dict[str, object]
        if self.spec.kind == "chat":
            choice = {"message": {"role": "assistant", "content": self.text, "tool_calls": None}}
        else:
            choice = {"text": self.text}
        return self._openai({**choice, "finish_reason": "length", "matched_stop": None}, self.usage(), False)


class DemoHTTPServer(ThreadingHTTPServer):
    """Threaded HTTP server holding the ``runtime``; no reverse-DNS lookup on bind."""

    daemon_threads = True
    request_queue_size = 512

    def __init__(self, address: tuple[str, int], runtime) -> None:
        self.runtime = runtime
        super().__init__(address, Handler)

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)


class Handler(BaseHTTPRequestHandler):
    """Routes one request (see module docstring)."""

    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as uvicorn sets it: a keep-alive reply written as headers then body waited
    # ~40 ms for the client's delayed ACK (Nagle): 21 /tokenize calls a second on one connection
    disable_nagle_algorithm = True
    server: DemoHTTPServer

    # ------------------------------------------------------------ transport
    def version_string(self) -> str:
        return "uvicorn"

    def log_request(self, code="-", size="-") -> None:
        if self.server.runtime.args.log_level in ("debug", "info"):
            phrase = http.HTTPStatus(int(code)).phrase if str(code).isdigit() else ""
            host, port = self.client_address[:2]
            self.server.runtime.log.uvicorn(f'{host}:{port} - "{self.requestline}" {code} {phrase}')

    def log_message(self, format, *args) -> None:  # noqa: A002 - stdlib signature
        pass  # uvicorn logs nothing else for ordinary client errors

    def _send(self, status: int, body: bytes = b"", ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data) -> None:
        self._send(status, json.dumps(data).encode())

    def _error(self, status: int, message: str) -> None:
        err = {"object": "error", "message": message, "type": http.HTTPStatus(status).phrase.replace(" ", "") + "Error",
               "param": None, "code": status}
        self._json(status, err)

    def _write_event(self, data) -> None:
        payload = b"data: " + (data if isinstance(data, bytes) else json.dumps(data).encode()) + b"\n\n"
        self.wfile.write(b"%X\r\n%s\r\n" % (len(payload), payload))

    # --------------------------------------------------------------- routes
    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def _route(self, method: str) -> None:
        rt = self.server.runtime
        path = self.path.split("?", 1)[0]
        if rt.args.api_key and not path.startswith(_OPEN_PREFIXES):
            if self.headers.get("Authorization", "") != f"Bearer {rt.args.api_key}":
                self._read_body()
                return self._json(401, {"error": "Unauthorized"})
        get_routes = {
            "/health": self._health, "/health_generate": self._health,
            "/v1/models": lambda: self._json(200, responses.models(rt)),
            "/model_info": lambda: self._json(200, responses.model_info(rt)),
            "/get_model_info": lambda: self._json(200, responses.model_info(rt)),
            "/server_info": lambda: self._json(200, responses.server_info(rt)),
            "/get_server_info": lambda: self._json(200, responses.server_info(rt)),
            "/v1/loads": lambda: self._json(200, responses.loads(rt)),
        }
        if rt.args.enable_metrics:
            get_routes["/metrics"] = lambda: self._send(
                200, responses.metrics(rt).encode(), "text/plain; version=0.0.4; charset=utf-8"
            )
        post_routes = {"/generate": "generate", "/v1/completions": "completions", "/v1/chat/completions": "chat"}
        if method == "GET" and path in get_routes:
            return get_routes[path]()
        if method == "POST" and path in post_routes:
            return self._generate(post_routes[path])
        if method == "POST" and path == "/tokenize":
            return self._tokenize()
        if path.startswith("/v1/models/") and method == "GET":
            if path[len("/v1/models/"):] == rt.args.served_model_name:
                return self._json(200, responses.model_card(rt))
            return self._json(404, {"error": {"message": f"The model '{path[11:]}' does not exist",
                                              "type": "invalid_request_error", "param": "model",
                                              "code": "model_not_found"}})
        self._read_body()
        known = path in get_routes or path in post_routes
        self._json(405 if known else 404, {"detail": "Method Not Allowed" if known else "Not Found"})

    def _tokenize(self) -> None:
        """SGLang's ``POST /tokenize`` (0.5.x; vLLM's has the same shape): ``{"prompt": str
        | [str], "add_special_tokens": bool}`` → ``{"tokens": [ids], "count": N,
        "max_model_len": context length}`` (a list of prompts: lists and counts per prompt).
        The demo tokenizer counts words (:func:`~optui.core.text.words.count_tokens`); the ids are
        word positions in its vocabulary (an unknown word: 0). ``--skip-tokenizer-init``: 400."""
        rt = self.server.runtime
        try:
            body = json.loads(self._read_body() or b"{}")
        except json.JSONDecodeError as exc:
            return self._error(400, f"invalid JSON body: {exc}")
        if getattr(rt.args, "skip_tokenizer_init", False):
            return self._error(400, "This server was started with --skip-tokenizer-init: it has no tokenizer")
        prompt = body.get("prompt") if isinstance(body, dict) else None
        if not isinstance(prompt, (str, list)) or isinstance(prompt, list) and not all(isinstance(p, str) for p in prompt):
            return self._error(400, "'prompt' must be a string or a list of strings")
        vocab = {w: i + 1 for i, w in enumerate(WORDS)}

        def ids(text: str) -> list[int]:
            return [vocab.get(w, 0) for w in text.split()][: max(0, count_tokens(text))]

        if isinstance(prompt, str):
            return self._json(200, {"tokens": ids(prompt), "count": count_tokens(prompt),
                                    "max_model_len": rt.args.context_length})
        return self._json(200, {"tokens": [ids(p) for p in prompt], "count": [count_tokens(p) for p in prompt],
                                "max_model_len": rt.args.context_length})

    def _health(self) -> None:
        ok, line = self.server.runtime.health()
        if line:
            self.server.runtime.log.main(line)
        self._send(200 if ok else 503)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _generate(self, kind: str) -> None:
        rt = self.server.runtime
        try:
            body = json.loads(self._read_body() or b"{}")
            if not isinstance(body, dict):
                raise ApiError(400, "request body must be a JSON object")
            spec = parse_generation(kind, body, rt.args.context_length)
        except json.JSONDecodeError as exc:
            return self._error(400, f"invalid JSON body: {exc}")
        except ApiError as exc:
            return self._error(exc.status, str(exc))
        req = rt.scheduler.submit(SimRequest(spec.prompt_tokens, spec.max_new_tokens, spec.prefix_hashes))
        shapes = _Shapes(spec, req, body.get("model") or rt.args.served_model_name)
        if not spec.stream:
            for _ in self._tokens(req):
                shapes.next_word()
            if not shapes.finished:
                return self._error(503, "The server is shutting down.")
            return self._json(200, shapes.full())
        try:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream; charset=utf-8")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            if kind == "chat":
                self._write_event(shapes.role_chunk())
            for _ in self._tokens(req):
                word = shapes.next_word()
                self._write_event(shapes.chunk(word, finished=kind == "generate" and shapes.finished))
            if shapes.finished and kind != "generate":
                self._write_event(shapes.chunk("", finished=True))
            self._write_event(b"[DONE]")
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            rt.scheduler.abort(req)
            self.close_connection = True

    def _tokens(self, req: SimRequest):
        """Yield once per token of ``req`` until it finishes or the server stops."""
        rt = self.server.runtime
        while True:
            try:
                item = req.events.get(timeout=0.5)
            except queue.Empty:
                if rt.status == "shutdown":
                    return
                continue
            if item is None:
                return
            yield item

"""optui's built-in load generator: streaming requests against an OpenAI/SGLang server.

Measures what SGLang's ``bench_serving`` measures (definitions in
:mod:`optui.core.bench.result`): per request TTFT (send → first chunk with text), every
gap between text chunks (ITL), TPOT ``(e2e - ttft) / (tokens - 1)`` and E2E. The output
token count is the server's ``usage.completion_tokens`` (``meta_info`` for ``/generate``)
when it sends one, else the number of text chunks. Only dependency: httpx.

Lengths are the server's tokens (issue 29): where the server has ``/tokenize`` (SGLang,
vLLM, llama.cpp, the demo) every synthetic prompt is cut to the most words whose token count,
as the server counts them (special tokens included, as a completion request adds them), is
at most ``input_len`` (:func:`fit_to_tokens`); ``extra["input_len_unit"]`` is then
``"tokens"`` and the workload says so (``Workload.length_unit``). The run's first prompt
(which says whether the server can count) and the warm-up ones are fitted before the first
request; the timed ones on the way, a bounded number ahead of the workers (all of those
before the clock starts), so a run of 100,000 prompts starts as soon as one of 10 does; the
search of each starts from the words per token learned so far (mostly 1-2 calls a prompt).
A prompt whose ``/tokenize`` call fails mid-run is not sent (a failed request: a dead server
still ends the run after its streak of failures). Without ``/tokenize`` the
prompt has ``input_len`` words, a stated approximation: ``"words"``, with the server's own
count beside it (``extra["prompt_tokens_per_request"]``, ``extra["tokens_per_word"]``: 32
words were ~97 tokens on llama.cpp). ``output_len`` is ``max_tokens`` with ``ignore_eos``:
the server's tokens already. A dataset's prompts are sent as they are (their lengths counted
in words).

Prompts measure the server, not its prefix cache. Synthetic prompts are words drawn from a
per-run seed (a fresh one unless given: recorded as
``Workload.seed``, the same seed gives the same prompts); every request, warm-up ones
included, starts with its own random word, so with ``shared_tokens = 0`` no two prompts share
a first token; ``shared_tokens = N`` puts one N-token system prompt (drawn from the seed) in
front of every prompt of the run, warm-up ones included. A dataset's prompts are sampled
with the seed, the warm-up's from the rest. The server's cache share of the timed run is
``extra["prefix_cache_hit_pct"]`` (llama.cpp's streamed ``timings``, else ``/metrics``
counter deltas between the warm-up's end and the run's end).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

import httpx

from optui.adapters.tls import client_tls_context
from optui.config import BuiltinBench, DatasetPrompts, SharedPrefix
from optui.core.bench.result import CACHE_HIT_KEY, BenchResult, Workload
from optui.core.server.metrics_map import MetricsParseError, Scrape, load_view, parse_scrape
from optui.core.stats import summarize
from optui.core.text.words import random_words

Endpoint = Literal["completions", "chat", "generate"]
PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions", "generate": "/generate"}
TOOL = "optui-loadgen"


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    """One request to send: prompt text, its length and the requested output (tokens)."""

    prompt: str
    input_len: int
    output_len: int


@dataclass(slots=True)
class Outcome:
    """What one request measured. Times in seconds (``chunk_times``: perf_counter stamps)."""

    ok: bool = False
    error: str | None = None
    ttft_s: float | None = None
    e2e_s: float = 0.0
    itls_s: list[float] = field(default_factory=list)
    chunk_times: list[float] = field(default_factory=list)
    output_tokens: int = 0
    prompt_tokens: int | None = None
    server_timings: dict | None = None


@dataclass(frozen=True, slots=True)
class RunPlan:
    """The requests of one run: ``timed`` ones (measured) and ``warmup`` ones (sent before
    the clock starts; no prompt of theirs is a timed prompt)."""

    timed: list[PlannedRequest]
    warmup: list[PlannedRequest]


#: Requests failing one after the other (at least this many, and twice the concurrency)
#: after which the server is taken for gone and the rest of the run is not sent.
UNREACHABLE_AFTER = 20


def new_seed() -> int:
    """A fresh prompt seed (0 .. 2**31 - 1) from the OS's randomness."""
    return random.SystemRandom().randrange(2**31)


def _nonce(rng: random.Random, seen: set[str]) -> str:
    """A random 8-hex-digit word not in ``seen`` (added to it): a prompt's first word."""
    while True:
        word = f"{rng.getrandbits(32):08x}"
        if word not in seen:
            seen.add(word)
            return word


def plan_run(
    num_prompts: int, input_len: int, output_len: int, *, random_lengths: bool = False, seed: int = 0,
    warmup: int = 0, shared_tokens: int = 0, dataset: list[str] | None = None,
) -> RunPlan:
    """The requests of a run, all determined by ``seed`` (see the module docstring).

    ``random_lengths`` draws each length uniformly from 1..len (SGLang's default
    ``--random-range-ratio 0.0``). ``shared_tokens`` (< ``input_len``) of every prompt are
    the run's shared system prompt; the rest (at least one word) is the request's own.
    ``dataset``: prompt texts to sample instead (lengths counted in words; needs at least
    ``num_prompts + warmup`` of them, else ValueError)."""
    rng = random.Random(seed)
    total = num_prompts + max(0, warmup)
    if dataset is not None:
        if len(dataset) < total:
            raise ValueError(f"the dataset has {len(dataset)} prompts; this run needs {total} "
                             f"({num_prompts} timed + {warmup} warm-up, none sent twice)")
        picked = rng.sample(dataset, total)
        out = [PlannedRequest(text, max(1, len(text.split())),
                              rng.randint(1, output_len) if random_lengths else output_len) for text in picked]
        return RunPlan(out[:num_prompts], out[num_prompts:])
    seen: set[str] = set()
    shared = [_nonce(rng, seen), *random_words(rng, shared_tokens - 1)] if shared_tokens > 0 else []
    out = []
    for _ in range(total):
        n_in = rng.randint(1, input_len) if random_lengths else input_len
        n_out = rng.randint(1, output_len) if random_lengths else output_len
        own = max(1, n_in - len(shared))
        words = [*shared, _nonce(rng, seen), *random_words(rng, own - 1)]
        out.append(PlannedRequest(" ".join(words), len(words), max(1, n_out)))
    return RunPlan(out[:num_prompts], out[num_prompts:])


def plan_requests(
    num_prompts: int, input_len: int, output_len: int, *, random_lengths: bool = False, seed: int = 0,
    shared_tokens: int = 0,
) -> list[PlannedRequest]:
    """The timed requests of :func:`plan_run` (what ``run_load`` with this seed measures)."""
    return plan_run(num_prompts, input_len, output_len, random_lengths=random_lengths, seed=seed,
                    shared_tokens=shared_tokens).timed


class DatasetError(ValueError):
    """A prompt dataset that cannot be read; the message names the file (and line)."""


def load_dataset(path: str) -> list[str]:
    """Prompts of a dataset file: one per line, either a JSON object with a ``"prompt"``
    string, a JSON string, or plain text (blank lines skipped). Raises DatasetError
    (``FILE:LINE: ...``) for an unreadable file, a bad JSON line or no prompts at all."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read the prompt dataset: {exc}") from None
    prompts = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text:
            continue
        if text[0] in "{\"":
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise DatasetError(f"{path}:{number}: not valid JSON: {exc}") from None
            value = value.get("prompt") if isinstance(value, dict) else value
            if not isinstance(value, str) or not value.strip():
                raise DatasetError(f"{path}:{number}: expected a non-empty \"prompt\" string")
            text = value
        prompts.append(text)
    if not prompts:
        raise DatasetError(f"{path}: the prompt dataset has no prompts")
    return prompts


class Tokenizer:
    """The server's ``/tokenize``, as far as it has one: :meth:`count` gives the number of
    tokens a prompt is to the server (special tokens included: a completion adds them), or
    None when the server has no such endpoint (none of the shapes answered the first
    question: then never asked again) or this call failed (``error`` says why; once a shape
    has answered, a failure is this call's only: a later one asks again).

    Shapes (the first that answers is kept): SGLang / vLLM ``POST /tokenize {"model",
    "prompt", "add_special_tokens": true}`` → ``{"count": N, "tokens": [...]}``; llama.cpp
    ``POST /tokenize {"content", "add_special": true}`` → ``{"tokens": [...]}``."""

    _SHAPES = ("prompt", "content")

    def __init__(self, client: httpx.AsyncClient, model: str | None) -> None:
        self._client = client
        self._model = model
        self._shape: str | None = None
        self._broken = False
        self.calls = 0
        self.error: str | None = None

    def _body(self, shape: str, text: str) -> dict:
        if shape == "content":
            return {"content": text, "add_special": True}
        body: dict = {"prompt": text, "add_special_tokens": True}
        if self._model:
            body["model"] = self._model
        return body

    async def count(self, text: str) -> int | None:
        """Tokens of ``text`` to the server, or None (no usable ``/tokenize``, or this call failed)."""
        if self._broken:
            return None
        for shape in ((self._shape,) if self._shape else self._SHAPES):
            self.calls += 1
            try:
                resp = await self._client.post("/tokenize", json=self._body(shape, text), timeout=30)
                data = resp.json() if resp.status_code == 200 else None
                self.error = None if data is not None else f"HTTP {resp.status_code}"
            except (httpx.HTTPError, ValueError) as exc:
                data, self.error = None, f"{type(exc).__name__}: {exc}"
            n = _token_count(data, shape)
            if n is not None and (n > 0 or not text.strip()):  # llama.cpp answers {"prompt"} with no tokens
                self._shape = shape
                return n
            self.error = self.error or "no token count in the answer"
        self._broken = self._shape is None
        return None


def _token_count(data, shape: str) -> int | None:
    """The count in a ``/tokenize`` answer: SGLang/vLLM's ``count`` (the ``prompt`` shape),
    llama.cpp's ``tokens`` list (the ``content`` shape); None when it is not there."""
    if not isinstance(data, dict):
        return None
    count = data.get("count")
    if shape == "prompt":
        return count if isinstance(count, int) and not isinstance(count, bool) else None
    tokens = data.get("tokens")
    return len(tokens) if isinstance(tokens, list) else None


#: The most ``/tokenize`` calls of one fit after its first (as many as the proportional search took before).
FIT_PROBES = 12


async def fit_to_tokens(
    tokenizer: Tokenizer, req: PlannedRequest, *, keep_words: int = 1, words_per_token: float | None = None,
) -> PlannedRequest | None:
    """``req`` with its prompt cut to the most words (at least ``keep_words``: a shared
    prefix and the request's own first word stay) whose token count is at most
    ``req.input_len``, and ``input_len`` the count of what is sent; None when the server
    has no ``/tokenize`` (or a call of this fit failed). A prompt already within its length
    is kept whole (a tokenizer that makes fewer tokens than words: ``input_len`` says how
    many); a length shorter than its first ``keep_words`` words is exceeded (``input_len``
    then says by how much).

    A proportional search over the number of words, every step a ``/tokenize`` call of the
    prefix; it ends with a prefix that fits next to one word more that does not (or the
    whole prompt), so the result does not depend on where it started. Without
    ``words_per_token`` it starts from the whole prompt (a few calls); with the ratio of the
    prompts fitted before, from ``input_len × words_per_token`` words: usually that prefix
    and the one a word longer (1-2 calls)."""
    words = req.prompt.split(" ")
    size, target = len(words), req.input_len
    keep = min(max(1, keep_words), size)
    counts: dict[int, int] = {}  # words -> tokens, as the server counted them

    async def measure(k: int) -> int | None:
        if k not in counts:
            n = await tokenizer.count(" ".join(words[:k]))
            if n is None:
                return None
            counts[k] = n
        return counts[k]

    first = size if words_per_token is None else min(size, max(keep, round(target * words_per_token)))
    n = await measure(first)
    if n is None:
        return None
    if first == size and n <= target:
        return PlannedRequest(req.prompt, n, req.output_len)
    # lo: the most words known to fit (not measured while it is ``keep``); hi: the fewest known
    # not to (size + 1: none known yet, every word may fit)
    lo, hi = (first, size + 1) if n <= target else (keep, first)
    for _ in range(FIT_PROBES):
        if hi - lo <= 1:
            break
        lo_tokens = counts.get(lo, 0)
        if hi <= size:  # between a fit and a miss: where the line through them reaches the target
            guess = lo + round((hi - lo) * (target - lo_tokens) / max(1, counts[hi] - lo_tokens))
        else:  # past a fit: its own words per token (at least one word more)
            guess = lo + max(1, round((target - lo_tokens) * lo / max(1, lo_tokens)))
        guess = min(hi - 1, max(lo + 1, guess))
        n = await measure(guess)
        if n is None:
            return None
        lo, hi = (guess, hi) if n <= target else (lo, guess)
    lo_tokens_measured = await measure(lo)
    if lo_tokens_measured is None:
        return None
    return PlannedRequest(" ".join(words[:lo]), lo_tokens_measured, req.output_len)


class _Fitter:
    """Fits a run's prompts to their token lengths (:func:`fit_to_tokens`) and learns the
    server's words per token from the prompts it cut, so that each later search starts
    where the answer usually is."""

    def __init__(self, tokenizer: Tokenizer, keep_words: int) -> None:
        self.tokenizer = tokenizer
        self.keep_words = keep_words
        self._words = 0
        self._tokens = 0

    async def fit(self, req: PlannedRequest) -> PlannedRequest | None:
        ratio = self._words / self._tokens if self._tokens else None
        fitted = await fit_to_tokens(self.tokenizer, req, keep_words=self.keep_words, words_per_token=ratio)
        if fitted is not None and fitted.prompt != req.prompt:  # a cut prompt: its words per token
            self._words += fitted.prompt.count(" ") + 1
            self._tokens += fitted.input_len
        return fitted


#: Timed prompts fitted ahead of the workers: at least ``FIT_AHEAD`` (twice the concurrency up
#: to ``FIT_AHEAD_MAX``), all fitted before the clock starts, then refilled as requests go out,
#: by up to ``FIT_TASKS`` tasks. Bounds the ``/tokenize`` calls before a run's first request,
#: whatever its number of prompts.
FIT_AHEAD, FIT_AHEAD_MAX, FIT_TASKS = 32, 256, 8


class _FittedQueue:
    """The timed requests of a run, handed out in turns (:meth:`get`), fitted to tokens a
    bounded number ahead of the workers by a few fitting tasks: fitting never sits between
    a worker and its next send while the fitters keep up, and nothing is fitted that the
    run does not reach (``stop()`` true: the fitters end). ``plan[i]`` holds request
    ``i`` fitted once it is handed out; ``unfitted[i]`` says why it could not be (a
    ``/tokenize`` call failed: it is not sent). Requests ``0 .. first - 1`` are fitted
    already; without a fitter every request is handed out as it is."""

    _END = -1

    def __init__(self, plan: list[PlannedRequest], fitter: _Fitter | None, *, first: int, concurrency: int,
                 stop: Callable[[], bool]) -> None:
        self.plan = plan
        self.unfitted: dict[int, str] = {}
        self._fitter = fitter
        self._stop = stop
        self._ready: asyncio.Queue[int] = asyncio.Queue()
        ahead = min(FIT_AHEAD_MAX, max(FIT_AHEAD, 2 * concurrency))
        self._prime_at = min(ahead, len(plan))
        self._room = asyncio.Semaphore(max(0, ahead - first))  # fitted or being fitted, not yet handed out
        self._next = iter(range(first, len(plan)))
        self._tasks: list[asyncio.Task] = []
        self._fitting = 0 if fitter is None else min(FIT_TASKS, max(2, concurrency), len(plan) - first)
        self.primed = asyncio.Event()  # set once ``ahead`` requests (or all) are ready to go
        for i in range(first if fitter is not None else len(plan)):
            self._ready.put_nowait(i)
        if self._fitting <= 0:
            self._ready.put_nowait(self._END)
            self.primed.set()

    def start(self) -> None:
        """Start fitting (the requests beyond ``first``)."""
        self._tasks = [asyncio.create_task(self._fit_loop()) for _ in range(max(0, self._fitting))]

    async def _fit_loop(self) -> None:
        assert self._fitter is not None
        try:
            while not self._stop():
                await self._room.acquire()
                i = next(self._next, None)
                if i is None or self._stop():
                    self._room.release()
                    break
                fitted = await self._fitter.fit(self.plan[i])
                if fitted is None:  # (read before any other call can answer: no await in between)
                    self.unfitted[i] = self._fitter.tokenizer.error or "no count"
                else:
                    self.plan[i] = fitted
                self._ready.put_nowait(i)
                if self._ready.qsize() >= self._prime_at:
                    self.primed.set()
        finally:
            self._fitting -= 1
            if self._fitting == 0:  # the last fitter: nothing more comes
                self._ready.put_nowait(self._END)
                self.primed.set()

    async def get(self) -> int | None:
        """The next request's index, or None when no request is left to hand out."""
        i = await self._ready.get()
        if i == self._END:
            self._ready.put_nowait(i)  # for the next worker
            return None
        if self._fitter is not None:
            self._room.release()
        return i

    async def close(self) -> None:
        """Stop fitting; raises what a fitting task raised (a bug, not the server's trouble)."""
        for task in self._tasks:
            task.cancel()
        for result in await asyncio.gather(*self._tasks, return_exceptions=True):
            if isinstance(result, Exception):
                raise result


async def _start_fitting(
    tokenizer: Tokenizer, plan: RunPlan, keep_words: int,
) -> tuple[_Fitter | None, list[PlannedRequest | str], list[PlannedRequest], int]:
    """The fitting of a run: (the fitter, or None when the server has no ``/tokenize``; the
    warm-up requests fitted, or why one could not be (its ``/tokenize`` failed); the timed requests,
    the first ``n`` of them fitted already; ``n``). Fits the run's first request (which says
    whether the server can count) and the warm-up ones, never the rest: those are fitted on
    the way (:class:`_FittedQueue`)."""
    timed = list(plan.timed)
    fitter = _Fitter(tokenizer, keep_words)
    first_of_run = plan.warmup[0] if plan.warmup else timed[0]
    fitted = await fitter.fit(first_of_run)
    if fitted is None:
        return None, list(plan.warmup), timed, 0
    if not plan.warmup:
        timed[0] = fitted
        return fitter, [], timed, 1
    limit = asyncio.Semaphore(FIT_TASKS)

    async def one(req: PlannedRequest) -> PlannedRequest | str:
        async with limit:
            return await fitter.fit(req) or tokenizer.error or "no count"

    rest = await asyncio.gather(*(one(r) for r in plan.warmup[1:]))
    return fitter, [fitted, *rest], timed, 0


def _not_fitted(why: str) -> Outcome:
    """The outcome of a request whose prompt could not be fitted to tokens: not sent (its
    length in tokens is unknown; never sent as words in a run whose lengths are tokens)."""
    return Outcome(error=f"not sent: its prompt could not be fitted to tokens (/tokenize: {why})")


async def _not_sent(why: str) -> Outcome:
    return _not_fitted(why)


def build_payload(endpoint: Endpoint, model: str | None, req: PlannedRequest, ignore_eos: bool) -> dict:
    """The JSON body of a streaming request for ``endpoint``."""
    if endpoint == "generate":
        params = {"max_new_tokens": req.output_len, "ignore_eos": ignore_eos, "temperature": 0.0}
        return {"text": req.prompt, "sampling_params": params, "stream": True}
    body: dict = {"model": model, "max_tokens": req.output_len, "ignore_eos": ignore_eos, "temperature": 0.0,
                  "stream": True, "stream_options": {"include_usage": True}}
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": req.prompt}]
    else:
        body["prompt"] = req.prompt
    return body


def _chunk_text_and_usage(endpoint: Endpoint, chunk: dict, seen_text: str) -> tuple[str, dict | None]:
    """(new text, usage dict or None) of one SSE event; ``seen_text`` is the cumulative
    text so far (SGLang's native stream repeats it)."""
    if "error" in chunk and not chunk.get("choices"):
        raise RuntimeError(f"server error in stream: {chunk['error']}")
    if endpoint == "generate":
        text = chunk.get("text") or ""
        return text[len(seen_text):], chunk.get("meta_info")
    choices = chunk.get("choices") or [{}]
    part = choices[0].get("delta", {}).get("content") if endpoint == "chat" else choices[0].get("text")
    usage = chunk.get("usage")
    return part or "", usage if isinstance(usage, dict) else None


#: Called for every streamed chunk with text by the requests of this context (the bench
#: run's stall watchdog sets it around a run: tasks inherit it, so no signature carries it).
ON_TOKEN: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar("optui_loadgen_on_token", default=None)


async def send_request(client: httpx.AsyncClient, endpoint: Endpoint, payload: dict) -> Outcome:
    """Send one streaming request and measure it; never raises except on cancellation.
    Every chunk with text calls :data:`ON_TOKEN`'s hook, if one is set."""
    out = Outcome()
    on_token = ON_TOKEN.get()
    start = last = time.perf_counter()
    text, chunks, usage = "", 0, None
    try:
        async with client.stream("POST", PATHS[endpoint], json=payload) as resp:
            if resp.status_code != 200:
                body = (await resp.aread()).decode(errors="replace")[:300]
                out.error = f"HTTP {resp.status_code}: {body}"
                return out
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                event = json.loads(data)
                part, chunk_usage = _chunk_text_and_usage(endpoint, event, text)
                usage = chunk_usage or usage
                if isinstance(event.get("timings"), dict):  # llama.cpp's own per-request timings
                    out.server_timings = event["timings"]
                if not part:
                    continue
                if on_token is not None:
                    on_token()
                now = time.perf_counter()
                if out.ttft_s is None:
                    out.ttft_s = now - start
                else:
                    out.itls_s.append(now - last)
                last = now
                text += part
                chunks += 1
                out.chunk_times.append(now)
    except (httpx.HTTPError, OSError, ValueError, RuntimeError) as exc:
        out.error = f"{type(exc).__name__}: {exc}"
        return out
    out.e2e_s = time.perf_counter() - start
    if chunks == 0:
        out.error = "the stream ended without any output text"
        return out
    out.output_tokens = int((usage or {}).get("completion_tokens") or chunks)
    prompt_tokens = (usage or {}).get("prompt_tokens")
    out.prompt_tokens = int(prompt_tokens) if prompt_tokens else None
    out.ok = True
    return out


async def _resolve_model(client: httpx.AsyncClient) -> str | None:
    """The first model id of ``GET /v1/models``, or None when the server does not say."""
    try:
        resp = await client.get("/v1/models")
        return resp.json()["data"][0]["id"]
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
        return None


def _peak_tokens_per_s(outcomes: list[Outcome]) -> float:
    """The most text chunks (≈ tokens) finished within one wall-clock second bucket."""
    stamps = [t for o in outcomes for t in o.chunk_times]
    if not stamps:
        return 0.0
    t0 = min(stamps)
    return float(max(Counter(int(t - t0) for t in stamps).values()))


def summarize_run(
    plan: list[PlannedRequest], outcomes: list[Outcome], duration_s: float, workload: Workload, peak_concurrency: int
) -> BenchResult:
    """Turn per-request outcomes into a :class:`BenchResult` (all latencies in ms)."""
    good = [(p, o) for p, o in zip(plan, outcomes) if o.ok]
    done = [o for _, o in good]
    total_in = sum(o.prompt_tokens or p.input_len for p, o in good)
    total_out = sum(o.output_tokens for o in done)
    duration = max(duration_s, 1e-9)
    itls = [x * 1000 for o in done for x in o.itls_s]
    # an ok outcome had a first chunk: its ttft_s is set (the "is not None" is for the type checker)
    ttfts = [o.ttft_s * 1000 for o in done if o.ttft_s is not None]
    tpots = [(o.e2e_s - o.ttft_s) / (o.output_tokens - 1) * 1000 for o in done if o.output_tokens > 1 and o.ttft_s is not None]
    errors = [o.error for o in outcomes if o.error]
    result = BenchResult(
        tool=TOOL,
        status="ok" if done else "failed",
        completed=len(done),
        failed=len(outcomes) - len(done),
        duration_s=duration_s,
        request_throughput=len(done) / duration,
        input_throughput_tok_s=total_in / duration,
        output_throughput_tok_s=total_out / duration,
        total_throughput_tok_s=(total_in + total_out) / duration,
        max_concurrency=workload.max_concurrency,
        request_rate=workload.request_rate,
        ttft_ms=summarize(ttfts),
        tpot_ms=summarize(tpots),
        itl_ms=summarize(itls),
        e2e_ms=summarize([o.e2e_s * 1000 for o in done]),
        total_input_tokens=total_in,
        total_output_tokens=total_out,
        workload=workload,
        error=None if done else (errors[0] if errors else "no request was sent"),
    )
    result.extra.update(
        peak_output_throughput_tok_s=_peak_tokens_per_s(done),
        peak_concurrent_requests=peak_concurrency,
        concurrency=sum(o.e2e_s for o in done) / duration,
        max_itl_ms=max(itls) if itls else None,
    )
    result.extra.update(_server_timings(done))
    return result


def _server_timings(done: list[Outcome]) -> dict:
    """What llama.cpp's ``timings`` (final stream chunk) say about the same requests, next
    to optui's own view, so the two can be checked against each other:
    ``server_prompt_tokens`` (Σ prompt_n + cache_n), ``server_predicted_tokens``
    (Σ predicted_n), ``server_prompt_ms`` (median prompt_ms: the server's TTFT without
    HTTP), ``server_tpot_ms`` (median predicted_per_token_ms), ``server_decode_tok_s``
    (Σ predicted_n / Σ predicted_ms) and ``server_output_tok_s`` (Σ predicted_n /
    Σ (prompt_ms + predicted_ms): the output throughput of requests sent one at a time, as
    the server timed them), ``prefix_cache_hit_pct`` (Σ cache_n / Σ (cache_n + prompt_n),
    in %). Empty unless every ok request carried timings."""
    timings = [o.server_timings for o in done if o.server_timings]
    if not timings or len(timings) != len(done):
        return {}
    try:
        prompt_ms = [float(t["prompt_ms"]) for t in timings]
        per_token = [float(t["predicted_per_token_ms"]) for t in timings if t.get("predicted_n")]
        predicted_ms = sum(float(t["predicted_ms"]) for t in timings)
        busy_ms = predicted_ms + sum(prompt_ms)
        predicted = sum(int(t["predicted_n"]) for t in timings)
        cached = sum(int(t.get("cache_n") or 0) for t in timings)
        prompt_total = cached + sum(int(t["prompt_n"]) for t in timings)
        return {
            CACHE_HIT_KEY: 100.0 * cached / prompt_total if prompt_total else None,
            "prefix_cache_source": "timings" if prompt_total else None,
            "server_prompt_tokens": sum(int(t["prompt_n"]) + int(t.get("cache_n") or 0) for t in timings),
            "server_predicted_tokens": predicted,
            "server_prompt_ms": summarize(prompt_ms)["median"],
            "server_tpot_ms": summarize(per_token)["median"] if per_token else None,
            "server_decode_tok_s": predicted / predicted_ms * 1000 if predicted_ms > 0 else None,
            "server_output_tok_s": predicted / busy_ms * 1000 if busy_ms > 0 else None,
        }
    except (KeyError, TypeError, ValueError):
        return {}


async def _scrape(client: httpx.AsyncClient) -> Scrape | None:
    """The server's ``/metrics`` now, or None when it has none (404, no server series,
    unparseable, unreachable)."""
    try:
        resp = await client.get("/metrics", timeout=10)
        if resp.status_code != 200:
            return None
        scrape = parse_scrape(resp.text, time.monotonic())
    except (httpx.HTTPError, OSError, MetricsParseError):
        return None
    return scrape if scrape.has_server_metrics else None


def _metrics_cache_share(before: Scrape | None, after: Scrape | None) -> dict:
    """``prefix_cache_hit_pct`` from the counters between two scrapes (vLLM
    ``prefix_cache_hits/queries``, SGLang ``cached_tokens/prompt_tokens``, llama.cpp
    ``prompt_tokens_cached/prompt_tokens``; SGLang's ``cache_hit_rate`` gauge as the last
    resort); empty when either scrape is missing or nothing was counted."""
    if before is None or after is None:
        return {}
    pct = load_view(after, before).prefix_hit_pct
    return {} if pct is None else {CACHE_HIT_KEY: pct, "prefix_cache_source": "metrics"}


#: Server-side latency histograms (seconds) → the ``extra`` key of their mean over a run (ms).
_SERVER_HISTOGRAMS = {
    "server_ttft_mean_ms": ("sglang:time_to_first_token_seconds", "vllm:time_to_first_token_seconds"),
    "server_itl_mean_ms": ("sglang:inter_token_latency_seconds", "vllm:inter_token_latency_seconds",
                           "vllm:time_per_output_token_seconds"),
    "server_e2e_mean_ms": ("sglang:e2e_request_latency_seconds", "vllm:e2e_request_latency_seconds"),
}


def _metrics_server_latency(before: Scrape | None, after: Scrape | None) -> dict:
    """The server's own mean TTFT / ITL / E2E over the timed run (ms), from its histograms'
    ``_sum`` / ``_count`` deltas (SGLang, vLLM); only the ones the server has and counted.
    Another client's requests in the same window are counted too."""
    if before is None or after is None:
        return {}
    out = {}
    for key, names in _SERVER_HISTOGRAMS.items():
        for name in names:
            total, count = (after.sums.get(name + suffix) for suffix in ("_sum", "_count"))
            total0, count0 = (before.sums.get(name + suffix) for suffix in ("_sum", "_count"))
            if total is None or count is None or total0 is None or count0 is None:
                continue
            if count - count0 > 0 and total >= total0:
                out[key] = 1000.0 * (total - total0) / (count - count0)
            break
    return out


def _prefix_label(shared_tokens: int, dataset: list[str] | None) -> str:
    if dataset is not None:
        return "dataset"
    return f"shared:{shared_tokens}" if shared_tokens > 0 else "none"


async def run_load(
    base_url: str,
    *,
    endpoint: Endpoint = "completions",
    model: str | None = None,
    input_len: int,
    output_len: int,
    num_prompts: int,
    concurrency: int,
    request_rate: float = math.inf,
    ignore_eos: bool = True,
    warmup: int = 1,
    random_lengths: bool = False,
    api_key: str | None = None,
    seed: int | None = None,
    shared_tokens: int = 0,
    dataset: list[str] | None = None,
    dataset_name: str = "random",
    on_progress: Callable[[int, int], None] | None = None,
    timeout_s: float = 600,
) -> BenchResult:
    """Benchmark ``base_url`` and return the result (never raises for server trouble).

    ``concurrency`` caps requests in flight (≤ 0: unlimited); ``request_rate`` in req/s
    spaces the sends with seeded Poisson arrivals when finite. ``seed`` draws the prompts
    (None: a fresh seed; recorded as ``result.workload.seed``); ``shared_tokens`` and
    ``dataset`` (prompt texts, named ``dataset_name`` in the workload) as in
    :func:`plan_run`. ``warmup`` requests, with prompts of their own, run before the clock
    starts; when all of them fail the result has status "failed",
    ``extra["failed_phase"] = "warmup"``. ``on_progress(done, total)`` is called with
    ``(0, total)`` when the timed run starts, then after every finished request.
    ``timeout_s`` bounds each request's connect and each read (seconds). ``model`` None:
    the first id of ``/v1/models``. Cancelling the task cancels every request and closes
    the HTTP client. A dataset too small for ``num_prompts + warmup`` gives a "failed"
    result saying so.
    """
    seed = new_seed() if seed is None else seed
    limit = concurrency if concurrency > 0 else max(1, num_prompts)
    workload = Workload(
        tool=TOOL, dataset=dataset_name if dataset is not None else "random", input_len=input_len,
        output_len=output_len, num_prompts=num_prompts, max_concurrency=concurrency if concurrency > 0 else None,
        request_rate=request_rate, prefix=_prefix_label(shared_tokens, dataset), seed=seed,
    )
    try:
        run_plan = plan_run(num_prompts, input_len, output_len, random_lengths=random_lengths, seed=seed,
                            warmup=warmup, shared_tokens=shared_tokens, dataset=dataset)
    except ValueError as exc:
        result = summarize_run([], [], 0.0, workload, 0)
        result.error = f"{dataset_name}: {exc}"
        return result
    plan = run_plan.timed
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    limits = httpx.Limits(max_connections=limit + warmup, max_keepalive_connections=limit + warmup)
    async with httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=headers, limits=limits, verify=client_tls_context(),
                                 timeout=httpx.Timeout(timeout_s)) as client:
        if model is None and endpoint != "generate":
            model = await _resolve_model(client)
        unit = "words"
        fitter: _Fitter | None = None
        warmup_reqs: list[PlannedRequest | str] = list(run_plan.warmup)
        fitted_first = 0
        if dataset is None and plan:  # the lengths are the server's tokens where it can count them
            fitter, warmup_reqs, plan, fitted_first = await _start_fitting(
                Tokenizer(client, model), run_plan, keep_words=(shared_tokens + 1) if shared_tokens else 1)
            if fitter is not None:
                unit = "tokens"
                workload = replace(workload, length_unit="tokens")
        gone: list[str] = []  # why the server is taken for gone: the rest is not sent
        # the timed prompts are fitted on the way, a bounded number ahead (from now: during the warm-up)
        feed = _FittedQueue(plan, fitter, first=fitted_first, concurrency=limit, stop=lambda: bool(gone))
        feed.start()
        try:
            if warmup_reqs and plan:
                warm = await asyncio.gather(*(
                    send_request(client, endpoint, build_payload(endpoint, model, p, ignore_eos))
                    if isinstance(p, PlannedRequest) else _not_sent(p) for p in warmup_reqs))
                if not any(o.ok for o in warm):
                    result = summarize_run([], [], 0.0, workload, 0)
                    result.error = f"Warmup failed - Please make sure benchmark arguments are correctly specified. Error: {warm[0].error}"
                    result.extra["failed_phase"] = "warmup"
                    return result
            await feed.primed.wait()
            before = await _scrape(client)
            outcomes: list[Outcome | None] = [None] * len(plan)
            semaphore = asyncio.Semaphore(limit)
            arrivals = random.Random(f"arrivals-{seed}")
            state = {"done": 0, "inflight": 0, "peak": 0, "failed_in_a_row": 0}
            unreachable_after = max(UNREACHABLE_AFTER, 2 * limit)

            async def one(i: int) -> None:
                async with semaphore:
                    if gone:
                        outcomes[i] = Outcome(error="not sent: " + gone[0])
                        return
                    if i in feed.unfitted:
                        out = _not_fitted(feed.unfitted[i])
                    else:
                        state["inflight"] += 1
                        state["peak"] = max(state["peak"], state["inflight"])
                        try:
                            out = await send_request(client, endpoint, build_payload(endpoint, model, plan[i], ignore_eos))
                        finally:
                            state["inflight"] -= 1
                    outcomes[i] = out
                state["failed_in_a_row"] = 0 if out.ok else state["failed_in_a_row"] + 1
                if state["failed_in_a_row"] >= unreachable_after and not gone:
                    gone.append(f"{state['failed_in_a_row']} requests in a row failed (last: {out.error})")
                state["done"] += 1
                if on_progress:
                    on_progress(state["done"], len(plan))

            if on_progress:
                on_progress(0, len(plan))

            async def worker() -> None:  # the workers take the requests in turns, each once
                while (i := await feed.get()) is not None:
                    await one(i)

            started = time.perf_counter()
            async with asyncio.TaskGroup() as group:
                if math.isfinite(request_rate) and request_rate > 0:  # Poisson arrivals: a task per request, when it arrives
                    for k in range(len(plan)):
                        if k and not gone:
                            await asyncio.sleep(arrivals.expovariate(request_rate))
                        if (i := await feed.get()) is None:
                            break
                        group.create_task(one(i))
                else:  # as fast as the cap allows: ``limit`` workers, not a task (and a payload) per request up front
                    for _ in range(min(limit, len(plan))):
                        group.create_task(worker())
            duration = time.perf_counter() - started
            after = await _scrape(client) if before is not None else None
        finally:
            await feed.close()
    ended = [o if o is not None else Outcome(error="not sent: " + (gone[0] if gone else "the run ended before it"))
             for o in outcomes]
    result = summarize_run(plan, ended, duration, workload, state["peak"])
    result.extra["endpoint"] = PATHS[endpoint]
    if dataset is None:
        result.extra.update(_length_note(plan, ended, unit))
    if gone:  # a server killed mid-run: never a run that measured something (99,992 of 100,000 failed: "ok")
        result.status = "failed"
        result.error = f"run stopped: {gone[0]}; {sum(o.error is not None and o.error.startswith('not sent') for o in ended)} requests not sent"
        result.extra["stopped"] = "server unreachable"
    if result.extra.get(CACHE_HIT_KEY) is None:
        result.extra.pop("prefix_cache_source", None)
        result.extra.update(_metrics_cache_share(before, after))
    result.extra.update(_metrics_server_latency(before, after))
    return result


def _length_note(plan: list[PlannedRequest], outcomes: list[Outcome], unit: str) -> dict:
    """What the prompts' lengths were: ``input_len_unit`` ("tokens": fitted with the server's
    ``/tokenize``; "words": its stated approximation), ``prompt_tokens_per_request`` (mean of
    the server's own ``usage.prompt_tokens`` over the ok requests that reported it) and
    ``tokens_per_word`` (those tokens per word sent): the measured ratio."""
    counted = [(p, o.prompt_tokens) for p, o in zip(plan, outcomes) if o.ok and o.prompt_tokens]
    out: dict = {"input_len_unit": unit}
    if counted:
        tokens = sum(n for _, n in counted if n is not None)
        sent_words = sum(len(p.prompt.split()) for p, _ in counted)
        out["prompt_tokens_per_request"] = tokens / len(counted)
        out["tokens_per_word"] = tokens / sent_words if sent_words else None
    return out


def length_line(result: BenchResult) -> str | None:
    """The line that says what ``input_len`` meant for a load-generator run: ``"Input
    lengths: 32 tokens per prompt (the server's /tokenize); the server counted 31.8"`` or
    ``"Input lengths: 32 words per prompt (no /tokenize: an approximation); the server
    counted 97.0 tokens per prompt, 3.03 tokens per word"``; None for other results."""
    unit, wl = result.extra.get("input_len_unit"), result.workload
    if unit not in ("tokens", "words") or wl.input_len is None:
        return None
    per = result.extra.get("prompt_tokens_per_request")
    ratio = result.extra.get("tokens_per_word")
    if unit == "tokens":
        head = f"Input lengths: up to {wl.input_len} tokens per prompt (the server's /tokenize)"
        return head + (f"; the server counted {per:.1f} per prompt" if isinstance(per, (int, float)) else "")
    head = f"Input lengths: {wl.input_len} words per prompt (no /tokenize: an approximation)"
    if isinstance(per, (int, float)):
        head += f"; the server counted {per:.1f} tokens per prompt"
        if isinstance(ratio, (int, float)):
            head += f", {ratio:.2f} tokens per word"
    return head


def describe_server_side(result: BenchResult) -> list[str]:
    """Lines shown beside a load-generator result: its prompts (seed, prefix sharing),
    the server's prefix-cache share, and the server's own timings where it sent them
    (llama.cpp's streamed ``timings``; SGLang/vLLM latency histograms from ``/metrics``),
    each next to optui's client-side number."""
    wl, extra = result.workload, result.extra
    if wl.seed is None or result.status != "ok":
        return [] if wl.seed is None else [f"Prompts: seed {wl.seed}, prefix {wl.prefix}"]
    lines = [f"Prompts: seed {wl.seed}, prefix {wl.prefix} (seed = {wl.seed} sends the same prompts again)"]
    pct = extra.get(CACHE_HIT_KEY)
    if isinstance(pct, (int, float)):
        source = "streamed timings" if extra.get("prefix_cache_source") == "timings" else "/metrics"
        lines.append(f"Server prefix cache: {pct:.1f}% of prompt tokens served from cache ({source})")
    else:
        lines.append("Server prefix cache: not reported (no timings, no cache counters in /metrics)")
    if extra.get("server_prompt_ms") is not None:
        def ms(value) -> str:
            return "-" if value is None else f"{value:.2f} ms"

        parts = [f"prompt {ms(extra.get('server_prompt_ms'))} (client TTFT {ms(result.ttft_ms.get('median'))})",
                 f"per token {ms(extra.get('server_tpot_ms'))} (client TPOT {ms(result.tpot_ms.get('median'))})"]
        if extra.get("server_decode_tok_s") is not None:
            parts.append(f"decode {extra['server_decode_tok_s']:.1f} tok/s")
        lines.append("Server timings (medians): " + ", ".join(parts))
    means = [(label, extra.get(key), getattr(result, client).get("mean")) for label, key, client in
             (("TTFT", "server_ttft_mean_ms", "ttft_ms"), ("ITL", "server_itl_mean_ms", "itl_ms"),
              ("E2E", "server_e2e_mean_ms", "e2e_ms"))]
    shown = [f"{label} {value:.2f} ms (client {client:.2f} ms)" for label, value, client in means
             if value is not None and client is not None]
    if shown:
        lines.append("Server latency (/metrics means): " + ", ".join(shown))
    if (lengths := length_line(result)) is not None:
        lines.append(lengths)
    return lines


async def run_builtin(
    base_url: str, cfg: BuiltinBench, *, concurrency: int, request_rate: float, run_index: int = 0,
    api_key: str | None = None, on_progress: Callable[[int, int], None] | None = None,
) -> BenchResult:
    """One run of a ``builtin`` benchmark preset: :func:`run_load` with the preset's
    workload. ``run_index`` is the run's place in its plan (points × repeats): with a fixed
    ``seed`` run k uses ``seed + k``, so every point and repeat still gets its own prompts.
    A dataset that cannot be read gives a "failed" result whose error names the file."""
    shared = cfg.prefix.shared_tokens if isinstance(cfg.prefix, SharedPrefix) else 0
    dataset, name = None, "random"
    if isinstance(cfg.prefix, DatasetPrompts):
        name = cfg.prefix.dataset
        try:
            dataset = await asyncio.to_thread(load_dataset, name)
        except DatasetError as exc:
            result = summarize_run([], [], 0.0, Workload(tool=TOOL, dataset=name, prefix="dataset"), 0)
            result.error = str(exc)
            return result
    return await run_load(
        base_url, endpoint=cfg.endpoint, model=cfg.model, input_len=cfg.input_len, output_len=cfg.output_len,
        num_prompts=cfg.prompts, concurrency=concurrency, request_rate=request_rate, ignore_eos=cfg.ignore_eos,
        warmup=cfg.warmup, random_lengths=cfg.random_lengths, api_key=api_key,
        seed=None if cfg.seed is None else cfg.seed + run_index, shared_tokens=shared, dataset=dataset,
        dataset_name=name, on_progress=on_progress,
    )

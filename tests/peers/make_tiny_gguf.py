"""Write a tiny randomly initialised LLaMA GGUF that llama.cpp servers load and stream from.

No model hub: weights are random F32, the tokenizer is a byte-level BPE whose merges are
learned at run time from a built-in paragraph. Specification: appendix of
``/work/shared/reference/llamacpp_peer.md``.

By default every non-printable token (EOS/EOT and other control tokens, unused padding,
control bytes, bytes >= 0x80) is suppressed, so each request streams exactly ``max_tokens``
printable chunks and never stops early: residual dimension 0 is held at a positive constant
and those tokens get a -1000 output weight on it. ``--allow-all-tokens`` turns this off.

    python make_tiny_gguf.py OUT.gguf [--layers N --embd N --heads N --kv-heads N --ff N
                                       --ctx N --merges N --seed N --allow-all-tokens]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

# Named sizes used by the fixtures and the reference (file sizes are for the default vocab).
SIZES: dict[str, dict[str, int]] = {
    "tiny": {"layers": 2, "embd": 64, "heads": 4, "kv_heads": 4, "ff": 128, "ctx": 512},  # 605 KB
    "medium": {"layers": 8, "embd": 512, "heads": 8, "kv_heads": 8, "ff": 2048, "ctx": 2048},  # 136 MB
    "big": {"layers": 16, "embd": 1024, "heads": 16, "kv_heads": 16, "ff": 4096, "ctx": 512},  # 1.08 GB
}

CONTROL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
VOCAB_MULTIPLE = 32
BAD_TOKEN_WEIGHT = -1000.0
RESIDUAL_CONSTANT = 3.0

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# The corpus the BPE merges are learned from: English prose about serving plus some code,
# so merged tokens look like words and identifiers in the (random) output.
TRAINING_TEXT = """\
The server is running on the main node and the client sends a request to the server.
Each request has a prompt, and the model returns tokens in a stream until the length is
reached. We measure the time to first token, the throughput in tokens per second, and the
latency of every token. When the batch size grows, the throughput goes up and the latency
goes up as well. The cache keeps the keys and the values of the attention for each slot.
If the memory is full, the scheduler waits, and the next request starts when a slot is free.
An error in the config or a wrong flag stops the server before the model is loaded.

def main():
    for request in requests:
        response = server.generate(request.prompt, max_tokens=16)
        if response.error:
            return print("error:", response.error)
        print(response.text, response.usage)
    return 0

class Server:
    def __init__(self, model, port=8080):
        self.model = model
        self.port = port
        self.slots = [None for _ in range(4)]

    def start(self):
        return self.model.load(self.port)

Optimization sessions try one change at a time: a new flag, a larger batch, a different
tensor parallel size or a quantized model. Each run is recorded with its result, so the
best configuration can be found again later. A benchmark sends many requests at the same
rate and reports the median and the tail of the latency, the number of requests that
failed, and the throughput of the whole system. The monitor shows the memory of every GPU,
the power, the temperature and the utilization while the server is running, and the log
of the server shows the progress of loading the weights and the state of every slot.

def benchmark(server, prompts, rate=4.0):
    results = []
    for prompt in prompts:
        start = time.time()
        tokens = server.complete(prompt, stream=True)
        results.append({"ttft": tokens.first - start, "total": time.time() - start})
    return sorted(results, key=lambda result: result["total"])

async def wait_ready(url, timeout=30.0):
    async with httpx.AsyncClient() as client:
        while True:
            response = await client.get(url + "/health")
            if response.status_code == 200:
                return True
            await asyncio.sleep(0.1)
"""

_PRETOKENIZE = re.compile(r" ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+")


@dataclass(frozen=True)
class TinyModel:
    """What was written: file path, parameter count (weights only), vocab and merge counts."""

    path: Path
    n_params: int
    n_vocab: int
    n_merges: int


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode character map."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(printable, map(chr, chars)))


def learn_merges(text: str, max_merges: int) -> list[tuple[str, str]]:
    """Byte-level BPE on ``text``: merge the most frequent adjacent pair until it occurs < 2 times.

    Words are pre-split GPT-2 style (a leading space stays with the word); ties go to the
    lexicographically smallest pair so the result is deterministic.
    """
    byte_map = bytes_to_unicode()
    words = Counter(tuple(byte_map[b] for b in w.encode()) for w in _PRETOKENIZE.findall(text))
    merges: list[tuple[str, str]] = []
    while len(merges) < max_merges:
        pairs: Counter[tuple[str, str]] = Counter()
        for word, freq in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += freq
        if not pairs:
            break
        best, count = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        if count < 2:
            break
        merges.append(best)
        joined = best[0] + best[1]
        merged: Counter[tuple[str, ...]] = Counter()
        for word, freq in words.items():
            out: list[str] = []
            i = 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(joined)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += freq
        words = merged
    return merges


def _vocab(merges: list[tuple[str, str]]) -> tuple[list[str], list[int], np.ndarray]:
    """Token strings, token types and the 'good' (printable, may be sampled) mask, by token id."""
    byte_map = bytes_to_unicode()
    tokens = [byte_map[b] for b in range(256)]  # token id == byte value
    types = [gguf.TokenType.NORMAL] * 256
    good = [b == 0x0A or 0x20 <= b <= 0x7E for b in range(256)]
    for a, b in merges:
        tokens.append(a + b)
        types.append(gguf.TokenType.NORMAL)
        good.append(True)
    for t in CONTROL_TOKENS:
        tokens.append(t)
        types.append(gguf.TokenType.CONTROL)
        good.append(False)
    n_unused = -len(tokens) % VOCAB_MULTIPLE
    for i in range(n_unused):
        tokens.append(f"<|unused_{i}|>")
        types.append(gguf.TokenType.UNUSED)
        good.append(False)
    return tokens, [int(t) for t in types], np.array(good)


def make_tiny_gguf(
    path: str | Path,
    *,
    layers: int = 2,
    embd: int = 64,
    heads: int = 4,
    kv_heads: int = 4,
    ff: int = 128,
    ctx: int = 512,
    merges: int = 256,
    seed: int = 0,
    allow_all_tokens: bool = False,
) -> TinyModel:
    """Write the model to ``path``; sizes are counts (layers, heads) and widths in elements."""
    if embd % heads or heads % kv_heads:
        raise ValueError(f"embd ({embd}) must divide by heads ({heads}) and heads by kv_heads ({kv_heads})")
    path = Path(path)
    head_dim = embd // heads
    learned = learn_merges(TRAINING_TEXT, merges)
    tokens, types, good = _vocab(learned)
    n_vocab = len(tokens)
    ids = {t: i for i, t in enumerate(tokens)}
    rng = np.random.default_rng(seed)

    def normal(shape: tuple[int, ...], std: float) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    # numpy shapes are (rows, cols) = (out, in): the reverse of ggml's ne order.
    tensors: list[tuple[str, np.ndarray]] = []
    token_embd = rng.standard_normal((n_vocab, embd), dtype=np.float32)
    tensors.append(("token_embd.weight", token_embd))
    for i in range(layers):
        attn_output = normal((embd, embd), 0.02)
        ffn_down = normal((embd, ff), 0.02)
        tensors += [
            (f"blk.{i}.attn_norm.weight", ones(embd)),
            (f"blk.{i}.attn_q.weight", normal((embd, embd), 0.02)),
            (f"blk.{i}.attn_k.weight", normal((kv_heads * head_dim, embd), 0.02)),
            (f"blk.{i}.attn_v.weight", normal((kv_heads * head_dim, embd), 0.02)),
            (f"blk.{i}.attn_output.weight", attn_output),
            (f"blk.{i}.ffn_norm.weight", ones(embd)),
            (f"blk.{i}.ffn_gate.weight", normal((ff, embd), 0.02)),
            (f"blk.{i}.ffn_up.weight", normal((ff, embd), 0.02)),
            (f"blk.{i}.ffn_down.weight", ffn_down),
        ]
        if not allow_all_tokens:
            # Nothing writes into residual dim 0, so it stays at RESIDUAL_CONSTANT.
            attn_output[0, :] = 0.0
            ffn_down[0, :] = 0.0
    # RMS-norm output has norm sqrt(embd): std 4/sqrt(embd) keeps logit std ~4 at any width.
    output = normal((n_vocab, embd), 4.0 / np.sqrt(embd))
    if not allow_all_tokens:
        token_embd[:, 0] = RESIDUAL_CONSTANT
        output[:, 0] = np.where(good, 0.0, BAD_TOKEN_WEIGHT)
    tensors += [("output_norm.weight", ones(embd)), ("output.weight", output)]

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("tiny-random-llama")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_context_length(ctx)
    writer.add_embedding_length(embd)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges([f"{a} {b}" for a, b in learned])
    eos = ids["<|endoftext|>"]
    writer.add_bos_token_id(eos)
    writer.add_eos_token_id(eos)
    writer.add_pad_token_id(eos)
    writer.add_eot_token_id(ids["<|im_end|>"])
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)
    for name, data in tensors:
        writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return TinyModel(path, sum(int(t.size) for _, t in tensors), n_vocab, len(learned))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="GGUF file to write")
    for flag, default in SIZES["tiny"].items():
        p.add_argument(f"--{flag.replace('_', '-')}", type=int, default=default, dest=flag)
    p.add_argument("--merges", type=int, default=256, help="BPE merges requested (fewer if the corpus runs out)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--allow-all-tokens", action="store_true", help="don't suppress EOS, control and non-printable tokens")
    args = vars(p.parse_args(argv))
    out = args.pop("out")
    try:
        model = make_tiny_gguf(out, **args)
    except ValueError as exc:
        p.error(str(exc))
    size = model.path.stat().st_size
    print(f"{model.path}: {model.n_params:,} params, vocab {model.n_vocab} ({model.n_merges} merges), {size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

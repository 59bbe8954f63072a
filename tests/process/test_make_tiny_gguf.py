"""The tiny GGUF generator writes what the appendix of llamacpp_peer.md specifies (read back with gguf)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

from tests.peers.make_tiny_gguf import SIZES, bytes_to_unicode, learn_merges, make_tiny_gguf

GENERATOR = Path(__file__).parents[1] / "peers" / "make_tiny_gguf.py"


def field(reader: gguf.GGUFReader, key: str) -> object:
    return reader.fields[key].contents()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[gguf.GGUFReader, object]:
    model = make_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")
    return gguf.GGUFReader(model.path), model


def test_default_size_matches_reference(tiny) -> None:
    reader, model = tiny
    assert model.n_params == 147_776 and model.n_vocab == 512
    assert 600_000 < model.path.stat().st_size < 620_000
    assert field(reader, "general.architecture") == "llama"
    assert field(reader, "general.name") == "tiny-random-llama"
    assert field(reader, "general.file_type") == gguf.LlamaFileType.ALL_F32
    assert field(reader, "llama.context_length") == 512
    assert field(reader, "llama.embedding_length") == 64
    assert field(reader, "llama.block_count") == 2
    assert field(reader, "llama.rope.dimension_count") == 16
    assert field(reader, "tokenizer.ggml.model") == "gpt2"
    assert field(reader, "tokenizer.ggml.pre") == "default"
    assert all(t.tensor_type == gguf.GGMLQuantizationType.F32 for t in reader.tensors)
    names = [t.name for t in reader.tensors]
    assert names[0] == "token_embd.weight" and names[-2:] == ["output_norm.weight", "output.weight"]
    assert len(names) == 2 + 9 * 2 + 1


def test_tokenizer_bytes_merges_and_control_tokens(tiny) -> None:
    reader, model = tiny
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    byte_map = bytes_to_unicode()
    assert tokens[:256] == [byte_map[b] for b in range(256)]
    merges = field(reader, "tokenizer.ggml.merges")
    assert len(merges) == model.n_merges > 200
    assert tokens[256 : 256 + len(merges)] == [m.replace(" ", "") for m in merges]
    eot = tokens.index("<|im_end|>")
    eos = tokens.index("<|endoftext|>")
    assert types[eos] == types[eot] == gguf.TokenType.CONTROL
    assert field(reader, "tokenizer.ggml.bos_token_id") == field(reader, "tokenizer.ggml.eos_token_id") == eos
    assert field(reader, "tokenizer.ggml.eot_token_id") == eot
    assert field(reader, "tokenizer.ggml.add_bos_token") is False
    assert all(t == gguf.TokenType.UNUSED for t in types[eos + 3 :])
    assert "<|im_start|>assistant\\n" in field(reader, "tokenizer.chat_template")


def test_mask_holds_dim0_and_blocks_bad_tokens(tiny) -> None:
    reader, _ = tiny
    t = {x.name: np.asarray(x.data) for x in reader.tensors}
    assert np.all(t["token_embd.weight"][:, 0] == 3.0)
    assert np.all(t["blk.0.attn_output.weight"][0] == 0) and np.all(t["blk.1.ffn_down.weight"][0] == 0)
    col0 = t["output.weight"][:, 0]
    good = [b for b in range(256) if b == 0x0A or 0x20 <= b <= 0x7E]
    assert np.all(col0[good] == 0)
    assert col0[0x00] == col0[0x80] == col0[0xFF] == -1000
    tokens = field(reader, "tokenizer.ggml.tokens")
    assert np.all(col0[tokens.index("<|endoftext|>") :] == -1000)


def test_allow_all_tokens_leaves_weights_random(tmp_path: Path) -> None:
    reader = gguf.GGUFReader(make_tiny_gguf(tmp_path / "m.gguf", allow_all_tokens=True).path)
    out = next(np.asarray(x.data) for x in reader.tensors if x.name == "output.weight")
    assert not np.any(out == -1000)


def test_merges_stop_when_no_pair_repeats() -> None:
    # "abab", "Ġabab": (a,b) x4, then (ab,ab) x2, then (Ġ,abab) only once -> stop
    assert learn_merges("abab abab", 100) == [("a", "b"), ("ab", "ab")]
    assert learn_merges("xyz", 100) == []


def test_cli_writes_requested_size(tmp_path: Path) -> None:
    out = tmp_path / "s.gguf"
    proc = subprocess.run(
        [sys.executable, str(GENERATOR), str(out), "--layers", "1", "--embd", "32", "--heads", "2", "--kv-heads", "1", "--ff", "64", "--ctx", "128"],
        capture_output=True, text=True, check=True,
    )
    assert "params, vocab 512" in proc.stdout
    reader = gguf.GGUFReader(out)
    assert field(reader, "llama.attention.head_count_kv") == 1
    k = next(x for x in reader.tensors if x.name == "blk.0.attn_k.weight")
    assert list(k.shape) == [32, 16]  # ggml ne order: (in, out) = (embd, kv_heads * head_dim)


def test_cli_rejects_indivisible_heads(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(GENERATOR), str(tmp_path / "x.gguf"), "--embd", "30"], capture_output=True, text=True)
    assert proc.returncode == 2 and "must divide" in proc.stderr


def test_named_sizes() -> None:
    assert SIZES["medium"]["embd"] == 512 and SIZES["big"]["layers"] == 16

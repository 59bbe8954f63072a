"""Write a tiny random-weight Llama in Hugging Face format for the vLLM and SGLang test peers.

Run with a Python that has ``torch``, ``transformers`` and ``tokenizers`` (the peers' venvs)::

    python tests/peers/make_tiny_hf.py OUT_DIR

OUT_DIR gets ``config.json``, ``model.safetensors`` (~8M parameters, bfloat16, seed 0),
``tokenizer.json`` (a byte-level BPE of 2,048 tokens trained with ``tokenizers`` on Python
standard-library sources, so no download and the same text on every machine of one Python
version), ``tokenizer_config.json`` with a chat template, and ``generation_config.json``.
No hub access: everything is generated here. Head size 64 is one the CPU attention backends of
vLLM and SGLang support.
"""

from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path

VOCAB = 2048
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
CORPUS_MODULES = ("argparse.py", "textwrap.py", "json/decoder.py", "pathlib.py", "subprocess.py")


def make(out: Path) -> None:
    """Write the model and tokenizer into ``out`` (created)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    corpus = [(stdlib / name).read_text(encoding="utf-8") for name in CORPUS_MODULES]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<s>", "</s>", "<pad>"]
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)

    config = LlamaConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=256, intermediate_size=768, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=2048,
        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id,
        tie_word_embeddings=False, torch_dtype="bfloat16",
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    model.generation_config.save_pretrained(out)
    (out / "optui-tiny.json").write_text(json.dumps({"vocab": tok.get_vocab_size(), "params": model.num_parameters()}) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_tiny_hf.py OUT_DIR")
    make(Path(sys.argv[1]))

"""Cheap pseudo-random English-ish words: synthetic prompts (load generator) and the
demo server's generated text. One word stands for one token everywhere in the demo."""

from __future__ import annotations

import random

#: The vocabulary: short ASCII words, all distinct.
WORDS = (
    "the of and to in is was for on that with as by at from it an be this are or his "
    "which had not but have they were all one their has been more when will there can "
    "time into about would some them other only its new over after also people made "
    "state first year many city world could before most these between long under great "
    "model token cache batch graph memory kernel tensor prefill decode server request "
    "latency stream weight layer head scale queue block shard value river stone light "
    "north market garden window signal paper silver orange engine simple quick bright"
).split()


def random_words(rng: random.Random, count: int) -> list[str]:
    """``count`` words drawn uniformly from :data:`WORDS` with ``rng``."""
    return rng.choices(WORDS, k=max(0, count))


def count_tokens(text: str) -> int:
    """The demo tokenizer: the number of whitespace-separated words (at least 1 for any
    non-empty text, 0 for empty text)."""
    return len(text.split())

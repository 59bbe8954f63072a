"""The demo server's prefix cache (SGLang's radix cache, simplified): which leading tokens
of a prompt an earlier request already prefilled.

Every prefix of a prefilled prompt is remembered by a chained hash of its tokens (the demo
tokenizer's words), least recently used first out once ``capacity`` prefixes are held
(longest first, so a prompt's cached part shrinks from its end). A
lookup returns the length of the longest remembered prefix, so two prompts that differ from
their first token share nothing, and prompts behind one shared system prompt share exactly
its tokens.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


def prefix_hashes(tokens: Sequence[str]) -> list[int]:
    """``out[k]`` identifies ``tokens[:k + 1]`` (equal prefixes, equal hashes)."""
    out, h = [], 0
    for token in tokens:
        h = hash((h, token))
        out.append(h)
    return out


class PrefixCache:
    """Remembered prompt prefixes, at most ``capacity`` of them (tokens). Not thread-safe:
    the scheduler calls it under its lock."""

    def __init__(self, capacity: int = 1 << 20) -> None:
        self.capacity = max(1, capacity)
        self._held: OrderedDict[int, None] = OrderedDict()

    def match(self, hashes: Sequence[int]) -> int:
        """The number of leading tokens (of the prompt whose :func:`prefix_hashes` these
        are) that are cached; refreshes them as recently used."""
        n = 0
        while n < len(hashes) and hashes[n] in self._held:
            n += 1
        self._touch(hashes[:n])
        return n

    def insert(self, hashes: Sequence[int]) -> None:
        """Remember every prefix of a prompt that has been prefilled."""
        for h in hashes:
            self._held[h] = None
        self._touch(hashes)
        while len(self._held) > self.capacity:
            self._held.popitem(last=False)

    def _touch(self, hashes: Sequence[int]) -> None:
        # shortest prefix last = most recently used: eviction trims prompts from their end,
        # like a radix tree's leaves, and never drops a prefix that a held longer one needs
        for h in reversed(hashes):
            self._held.move_to_end(h)

    def __len__(self) -> int:
        return len(self._held)

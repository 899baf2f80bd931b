"""Text for a character-level language model: a tokenizer and a batch sampler."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


class CharTokenizer:
    """One token per distinct character of a text, numbered in sorted order."""

    def __init__(self, text: str) -> None:
        if not text:
            raise ValueError("CharTokenizer: the text is empty")
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> npt.NDArray[np.int64]:
        """The tokens of ``text``; a character outside the vocabulary is an error."""
        unknown = set(text) - self.index.keys()
        if unknown:
            raise ValueError(
                f"CharTokenizer: {min(unknown)!r} is not in the vocabulary of "
                f"{self.vocab_size} characters"
            )
        # BEGIN SOLUTION 5.4
        return np.fromiter((self.index[c] for c in text), np.int64, len(text))
        # END SOLUTION

    def decode(self, tokens: npt.ArrayLike) -> str:
        """The text of ``tokens``; a token outside the vocabulary is an error."""
        ids = np.asarray(tokens).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            bad = int(ids.max() if ids.max() >= self.vocab_size else ids.min())
            raise ValueError(
                f"CharTokenizer: token {bad} is outside the vocabulary [0, {self.vocab_size})"
            )
        # BEGIN SOLUTION 5.4
        return "".join(self.chars[i] for i in ids)
        # END SOLUTION


def get_batch(
    data: npt.NDArray[np.integer], batch_size: int, block_size: int, rng: np.random.Generator
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``batch_size`` windows of ``block_size`` tokens at random starts, and the same
    windows shifted by one (each position's next token): ``x``, ``y`` of shape
    ``(batch_size, block_size)``."""
    if len(data) <= block_size:
        raise ValueError(f"get_batch: {len(data)} tokens, need more than block_size {block_size}")
    # BEGIN SOLUTION 5.4
    starts = rng.integers(0, len(data) - block_size, size=batch_size)
    offsets = np.arange(block_size)
    x = np.asarray(data)[starts[:, None] + offsets]
    y = np.asarray(data)[starts[:, None] + offsets + 1]
    return x.astype(np.int64), y.astype(np.int64)
    # END SOLUTION

"""Draw the chapters' computation-graph figures into ``docs/figures/`` with the
framework's own ``draw_graph`` (``module1/graph.py``):

- ``graph_linear.png``: a Linear layer and the binary cross-entropy (stage 1);
- ``graph_digit_cnn.png``: the digits CNN and its loss, one box per layer (stage 4);
- ``graph_gpt.png``: a one-block GPT and its loss, the block's parts as boxes (stage 5);
- ``graph_gpt_block.png``: one block alone, its sub-layers as boxes (stage 5).

Each model runs once inside ``record_modules``, then ``backward(retain_graph=True)``
keeps what every node saved, so the figure shows both the bytes kept for backward and
the gradients' norms. Inputs come from fixed seeds, so a run gives the same figures.
The text form of each graph is printed. Regenerate them with::

    .venv/bin/python docs/graphs.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from module1 import Linear, binary_cross_entropy_with_logits, from_numpy
from module1.graph import draw_graph, graph_summary, record_modules
from module2.fast_ops import FastTensorBackend
from module4.losses import cross_entropy
from module4.models import DigitCNN
from module5.gpt import GPT, Block, GPTConfig
from module5.losses import lm_cross_entropy

OUT_DIR = Path(__file__).resolve().parent / "figures"


def linear() -> Path:
    """Stage 1: every operation of ``Linear(3, 1)`` and the loss, parameters named."""
    rng = np.random.default_rng(0)
    layer = Linear(3, 1, rng=rng)
    x = from_numpy(rng.normal(size=(4, 3)))
    y = from_numpy(np.array([[1.0], [0.0], [1.0], [1.0]]))
    x.name, y.name = "x", "y"
    with record_modules(layer):
        loss = binary_cross_entropy_with_logits(layer(x), y)
    loss.backward(retain_graph=True)
    print(graph_summary(loss, modules=layer, depth=None), end="\n\n")
    return draw_graph(loss, OUT_DIR / "graph_linear.png", modules=layer, depth=None,
                      title="Linear(3, 1) and binary_cross_entropy_with_logits")  # fmt: skip


def digit_cnn() -> Path:
    """Stage 4: the digits CNN on a batch of 16 8x8 images, each layer one box."""
    rng = np.random.default_rng(0)
    model = DigitCNN()
    images = from_numpy(rng.random((16, 1, 8, 8)), FastTensorBackend)
    images.name = "images"
    with record_modules(model):
        loss = cross_entropy(model(images), np.arange(16) % 10)
    loss.backward(retain_graph=True)
    print(graph_summary(loss, modules=model, depth=0), end="\n\n")
    return draw_graph(loss, OUT_DIR / "graph_digit_cnn.png", modules=model, depth=0,
                      title="DigitCNN and cross_entropy, depth=0")  # fmt: skip


def gpt() -> Path:
    """Stage 5: a GPT of one block on 2 sequences of 16 tokens, the block's LayerNorms,
    attention and MLP as boxes."""
    rng = np.random.default_rng(0)
    config = GPTConfig(vocab_size=65, block_size=16, n_layer=1, n_head=4, n_embd=32)
    model = GPT(config)
    tokens = rng.integers(0, 65, (2, 17))
    with record_modules(model):
        logits = model(tokens[:, :-1]).contiguous().view(2 * 16, 65)
        loss = lm_cross_entropy(logits, tokens[:, 1:].reshape(-1))
    loss.backward(retain_graph=True)
    print(graph_summary(loss, modules=model, depth=1), end="\n\n")
    return draw_graph(loss, OUT_DIR / "graph_gpt.png", modules=model, depth=1,
                      title="A one-block GPT and its loss, depth=1")  # fmt: skip


def gpt_block() -> Path:
    """Stage 5: one pre-LN block on its own (B, T, C) input, its LayerNorms, attention and
    MLP as boxes: the two residual adds are the only operations drawn."""
    rng = np.random.default_rng(0)
    block = Block(32, 4, 0.0, 1, rng, FastTensorBackend)
    x = from_numpy(rng.normal(size=(2, 16, 32)), FastTensorBackend).requires_grad_()
    with record_modules(block):
        loss = block(x).sum()
    loss.backward(retain_graph=True)
    print(graph_summary(loss, modules=block, depth=0), end="\n\n")
    return draw_graph(loss, OUT_DIR / "graph_gpt_block.png", modules=block, depth=0,
                      title="One GPT block on x of shape (2, 16, 32), depth=0")  # fmt: skip


def main() -> None:
    for make in (linear, digit_cnn, gpt, gpt_block):
        print(f"wrote {make()}\n")


if __name__ == "__main__":
    main()

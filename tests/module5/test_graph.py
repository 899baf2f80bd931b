"""Stage 1's graph picture on stage 5's models (``module1/graph.py``, given code): a
transformer block collapses into its LayerNorms, attention and MLP, the tied head's
table stays a leaf of its own, and stage 5 exports the tools. Not a task's tests (the
graph tools are given code), but the models are tasks 5.1-5.3's, so on the handout these
pass once those do."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import module5
from module1.graph import draw_graph, graph_nodes, graph_summary, record_modules
from module1.tensor import from_numpy
from module1.tensor_ops import SimpleBackend
from module5.gpt import GPT, Block, GPTConfig


def test_a_block_draws_as_its_four_parts(tmp_path: Path) -> None:
    block = Block(16, 2, 0.0, 1, np.random.default_rng(0), SimpleBackend)
    x = from_numpy(np.random.default_rng(1).normal(size=(2, 4, 16)))
    x.requires_grad_()
    with record_modules(block):
        out = block(x).sum()
    out.backward(retain_graph=True)
    nodes = graph_nodes(out, modules=block, depth=0)
    assert [(n.kind, n.name, n.params, n.shape) for n in nodes if n.kind != "leaf"] == [
        ("module", "ln_1 (LayerNorm)", 2, (2, 4, 16)),
        ("module", "attn (MultiHeadAttention)", 4, (2, 4, 16)),
        ("op", "", 0, (2, 4, 16)),  # x + attn(...)
        ("module", "ln_2 (LayerNorm)", 2, (2, 4, 16)),
        ("module", "mlp (MLP)", 4, (2, 4, 16)),
        ("op", "", 0, (2, 4, 16)),  # x + mlp(...)
        ("op", "", 0, ()),  # the sum
    ]
    assert [n.op for n in nodes if n.kind == "op"] == ["Add", "Add", "Sum"]
    inner = graph_nodes(out, modules=block, depth=1)
    assert [n.name for n in inner if n.kind == "module"] == [
        "attn.c_attn (Linear)", "attn.c_proj (Linear)", "mlp.c_fc (Linear)", "mlp.gelu (GELU)",
        "mlp.c_proj (Linear)",
    ]  # fmt: skip
    assert "attn (MultiHeadAttention)" in graph_summary(out, modules=block, depth=0)
    assert draw_graph(out, tmp_path / "block.png", modules=block, depth=0).stat().st_size > 10_000


def test_the_tied_table_is_the_leaf_read_twice() -> None:
    config = GPTConfig(vocab_size=11, block_size=4, n_layer=1, n_head=2, n_embd=8)
    model = GPT(config, backend=SimpleBackend)
    with record_modules(model):
        out = model(np.array([[1, 2, 3]])).sum()
    leaves = [n.name for n in graph_nodes(out, modules=model, depth=0) if n.kind == "leaf"]
    assert leaves == ["wte.weight"]  # every other parameter is inside its module's box
    boxes = [n.name for n in graph_nodes(out, modules=model, depth=0) if n.kind == "module"]
    assert boxes == ["wte (Embedding)", "wpe (Embedding)", "h0 (Block)", "ln_f (LayerNorm)"]


def test_exported_by_stage_5() -> None:
    assert module5.draw_graph is draw_graph and module5.graph_summary is graph_summary
    assert module5.record_modules is record_modules

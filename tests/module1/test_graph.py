"""The picture and table of a tensor graph (``module1/graph.py``, given code):
``graph_nodes`` / ``graph_summary`` / ``draw_graph`` / ``record_modules`` on small
graphs whose nodes, shapes, saved bytes and gradient norms are counted by hand or by
NumPy here; module calls collapsed by depth; the too-big refusal; a real PNG.
Not a task's tests (the graph tools are given code), but the graphs they draw are made
by tasks 1.3-1.5's operations and layers, so on the handout they pass once those do."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import pytest

import module0.module as module_hooks
import module1
from module0.module import Module
from module0.scalar import Scalar
from module1.graph import (
    draw_graph,
    format_bytes,
    graph_nodes,
    graph_summary,
    record_modules,
    saved_total,
)
from module1.tensor import Tensor, from_numpy
from module1.tensor_nn import MLP, Linear


def leaf(values: np.ndarray, name: str | None = None, dtype: type = np.float64) -> Tensor:
    t = from_numpy(np.asarray(values, dtype=dtype))
    t.requires_grad_()
    t.name = name
    return t


def small(dtype: type = np.float64) -> tuple[Tensor, Tensor, Tensor]:
    """``sum(relu(x @ w) * relu(x @ w))`` with x (2, 3) and w (3, 2)."""
    rng = np.random.default_rng(0)
    x = leaf(rng.normal(size=(2, 3)), "x", dtype)
    w = leaf(rng.normal(size=(3, 2)), "w", dtype)
    r = (x @ w).relu()
    return x, w, (r * r).sum()


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_nodes_of_a_small_expression_in_creation_order() -> None:
    x, w, out = small()
    nodes = graph_nodes(out)
    assert [(n.kind, n.op, n.name) for n in nodes] == [
        ("leaf", "leaf", "x"),
        ("leaf", "leaf", "w"),
        ("op", "MatMul", ""),
        ("op", "ReLU", ""),
        ("op", "Mul", ""),
        ("op", "Sum", ""),
    ]
    keys = [n.key for n in nodes]
    assert [n.inputs for n in nodes] == [(), (), (keys[0], keys[1]), (keys[2],), (keys[3],),
                                         (keys[4],)]  # fmt: skip
    assert [n.shape for n in nodes] == [(2, 3), (3, 2), (2, 2), (2, 2), (2, 2), ()]
    assert keys[0] == x.unique_id and keys[1] == w.unique_id and keys[-1] == out.unique_id


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_saved_bytes_are_the_hand_count(dtype: type) -> None:
    size = np.dtype(dtype).itemsize
    _, _, out = small(dtype)
    saved = [n.saved_bytes for n in graph_nodes(out) if n.kind == "op"]
    # MatMul keeps x and w (6 + 6 entries), ReLU its input (4), Mul r twice (one
    # storage, 4), Sum only a shape.
    assert saved == [12 * size, 4 * size, 4 * size, 0]
    # In the total each storage once: x, w, x @ w, relu(x @ w); x and w are leaves.
    assert saved_total(out) == (20 * size, 12 * size)
    summary = graph_summary(out)
    assert f"{np.dtype(dtype)}" in summary and "(2, 3)" in summary and "(3, 2)" in summary
    assert f"kept for backward: {20 * size} B" in summary


def test_a_storage_kept_by_several_nodes_counts_once_in_the_total() -> None:
    x = leaf(np.ones((2, 3)), "x")
    a, b = leaf(np.ones((2, 3)), "a"), leaf(np.ones((2, 3)), "b")
    v = x.view(6)  # a view reads x's storage: saving it keeps x's 48 bytes
    out = (x * a).sum() + (x * b).sum() + (v * v).sum()
    muls = [n.saved_bytes for n in graph_nodes(out) if n.op == "Mul"]
    assert muls == [96, 96, 48]
    assert saved_total(out) == (144, 144)  # x, a, b: 48 bytes each, all leaves


def test_backward_frees_what_it_used_unless_retained() -> None:
    _, _, out = small()
    out.backward()
    nodes = graph_nodes(out)
    assert [n.saved_bytes for n in nodes if n.kind == "op"] == [None] * 4
    assert "freed" in graph_summary(out) and saved_total(out) == (0, 0)


def test_grad_norms_are_numpys_norms_of_grad() -> None:
    x, w, out = small()
    assert all(n.grad_norm is None for n in graph_nodes(out))
    out.backward(retain_graph=True)
    norms = {n.name: n.grad_norm for n in graph_nodes(out) if n.kind == "leaf"}
    assert x.grad is not None and w.grad is not None
    assert norms["x"] == pytest.approx(np.linalg.norm(x.grad.to_numpy()), rel=1e-12)
    assert norms["w"] == pytest.approx(np.linalg.norm(w.grad.to_numpy()), rel=1e-12)
    assert f"{norms['x']:.4g}" in graph_summary(out)
    # Retained: the saved bytes are still there.
    assert saved_total(out)[0] == 20 * 8


def test_leaves_named_by_a_modules_parameters_or_a_mapping() -> None:
    layer = Linear(3, 2)
    x = from_numpy(np.ones((4, 3)))
    out = layer(x).sum()
    names = [(n.kind, n.name) for n in graph_nodes(out, modules=layer) if n.kind != "op"]
    assert names == [("leaf", "weight"), ("leaf", "bias"), ("const", "const")]
    model = MLP((3, 2, 1))
    out = model(x).sum()
    leaves = [n.name for n in graph_nodes(out, modules=model) if n.kind == "leaf"]
    assert leaves == ["layer1.weight", "layer1.bias", "layer2.weight", "layer2.bias"]
    unnamed = [n.name for n in graph_nodes(out) if n.kind == "leaf"]
    assert unnamed == ["weight", "bias", "weight", "bias"]  # the Parameters' own names
    mapped = graph_nodes(out, modules={"images": x, "W1": model.layer1.weight.value})
    assert [n.name for n in mapped if n.kind != "op"] == ["images", "W1", "bias", "weight",
                                                          "bias"]  # fmt: skip
    assert [n.name for n in mapped if n.kind == "const"] == ["images"]


class Pair(Module):
    """Two MLPs, the second read twice: modules at depth 1, Linears at depth 2."""

    def __init__(self) -> None:
        super().__init__()
        self.left = MLP((3, 4, 2), seed=1)
        self.right = MLP((2, 2), seed=2)

    def forward(self, x: Tensor) -> Tensor:
        return self.right(self.right(self.left(x)).relu())


def recorded() -> tuple[Pair, Tensor, Tensor]:
    model = Pair()
    x = from_numpy(np.random.default_rng(3).normal(size=(5, 3)))
    with record_modules(model):
        out = model(x).sum()
    out.backward(retain_graph=True)
    return model, x, out


def test_module_calls_collapse_by_depth() -> None:
    model, _, out = recorded()
    full = graph_nodes(out, modules=model, depth=None)
    ops = [n.op for n in full if n.kind == "op"]
    # left: MatMul Add ReLU MatMul Add; right twice: MatMul Add; ReLU between; Sum.
    assert ops == ["MatMul", "Add", "ReLU", "MatMul", "Add", "MatMul", "Add", "ReLU",
                   "MatMul", "Add", "Sum"]  # fmt: skip
    assert [n.name for n in full if n.kind == "op"][:3] == ["left.layer1", "left.layer1", "left"]
    assert len(full) == len(ops) + 1 + 6  # x and six parameters

    boxes = graph_nodes(out, modules=model, depth=0)
    kinds = [(n.kind, n.op, n.name) for n in boxes]
    # right's parameters are read by two calls, so they stay outside both boxes.
    assert kinds == [
        ("leaf", "leaf", "right.layer1.weight"),
        ("leaf", "leaf", "right.layer1.bias"),
        ("const", "const", "const"),
        ("module", "MLP", "left (MLP)"),
        ("module", "MLP", "right (MLP)"),
        ("op", "ReLU", ""),
        ("module", "MLP", "right (MLP)"),
        ("op", "Sum", ""),
    ]
    left, first, relu, second = boxes[3], boxes[4], boxes[5], boxes[6]
    assert (left.ops, left.params, left.shape) == (5, 4, (5, 2))
    assert first.inputs == (left.key, boxes[0].key, boxes[1].key)
    assert relu.inputs == (first.key,) and second.inputs[0] == relu.key
    # left's box keeps what its five operations keep: x and W1, W1's output, ReLU's
    # input (x @ W1 + b1), then that ReLU's output and W2 for the second product.
    hand = 8 * (5 * 3 + 3 * 4 + 5 * 4 + 5 * 4 + 4 * 2)
    assert left.saved_bytes == hand
    grads = [p.value.grad.to_numpy() for _, p in model.left.named_parameters()]
    assert left.grad_norm == pytest.approx(np.sqrt(sum((g**2).sum() for g in grads)))
    deeper = graph_nodes(out, modules=model, depth=1)
    assert [n.name for n in deeper if n.kind == "module"] == [
        "left.layer1 (Linear)", "left.layer2 (Linear)", "right.layer1 (Linear)",
        "right.layer1 (Linear)",
    ]  # fmt: skip
    summary = graph_summary(out, modules=model, depth=0)
    row = rf"\nleft \(MLP\) +5 ops +\(5, 2\) +float64 +600 B +{left.grad_norm:.4g}\n"
    assert re.search(row, summary), summary


def test_recording_changes_no_value_and_always_stops() -> None:
    model = MLP((3, 4, 2))
    x = from_numpy(np.ones((2, 3)))
    plain = model(x).to_numpy()
    with record_modules(model) as recording:
        assert module_hooks.call_hook is not None
        with pytest.raises(RuntimeError, match="already active"), record_modules(model):
            pass
        same = model(x).to_numpy()
    assert module_hooks.call_hook is None
    np.testing.assert_array_equal(plain, same)
    assert [(c.name, c.kind, c.depth) for c in recording.calls] == [
        ("", "MLP", 0), ("layer1", "Linear", 1), ("layer2", "Linear", 1)
    ]  # fmt: skip
    with pytest.raises(ValueError, match="boom"), record_modules(model):
        raise ValueError("boom")
    assert module_hooks.call_hook is None


def test_too_big_graphs_are_refused_with_advice(tmp_path: Path) -> None:
    x = leaf(np.ones(2))
    y = x
    for _ in range(130):
        y = y * 1.01
    with pytest.raises(ValueError, match=r"262 nodes.*smaller expression"):
        draw_graph(y.sum(), tmp_path / "big.png")
    assert not (tmp_path / "big.png").exists()

    class Deep(Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = MLP([2] * 70)

        def forward(self, t: Tensor) -> Tensor:
            return self.inner(t)

    model = Deep()
    with record_modules(model):
        out = model(from_numpy(np.ones((1, 2)))).sum()
    with pytest.raises(ValueError, match="smaller depth than 1"):
        draw_graph(out, tmp_path / "deep.png", modules=model, depth=1)
    with pytest.raises(ValueError, match=r"pass depth=1 \(or 0\)"):
        draw_graph(out, tmp_path / "deep.png", modules=model, depth=None)
    assert len(graph_nodes(out, modules=model, depth=0)) == 3  # input, Deep.inner, Sum
    assert png_size(draw_graph(out, tmp_path / "deep.png", modules=model, depth=0))[0] > 100


def test_draw_graph_writes_a_png_of_plausible_size(tmp_path: Path) -> None:
    model, _, out = recorded()
    path = draw_graph(out, tmp_path / "g" / "graph.png", modules=model, depth=0, title="Pair")
    width, height = png_size(path)
    assert 200 < width < 2000 and 300 < height < 3000
    assert path.stat().st_size > 10_000
    full = draw_graph(out, tmp_path / "full.png", modules=model, depth=None, direction="LR")
    assert png_size(full)[0] > png_size(full)[1]  # left to right: wider than tall
    # A Scalar's graph is drawn as stage 0 draws it.
    s = Scalar(2.0, name="s") * Scalar(3.0)
    assert png_size(draw_graph(s, tmp_path / "scalar.png"))[0] > 100


def test_exported_by_stage_1() -> None:
    assert module1.draw_graph is draw_graph and module1.graph_summary is graph_summary
    assert module1.record_modules is record_modules


def test_format_bytes() -> None:
    assert [format_bytes(n) for n in (0, 1536, 10 * 1024, 5 * 1024**2, 20 * 1024**2)] == [
        "0 B", "1,536 B", "10.0 KiB", "5.0 MiB", "20.0 MiB"
    ]  # fmt: skip
    assert format_bytes(None) == "freed"

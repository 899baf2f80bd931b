"""Figures the training scripts save: decision boundary and learning curves."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from module0.datasets import Graph


def plot_classifier(
    data: Graph,
    predict: Callable[[Sequence[tuple[float, float]]], Sequence[float]],
    losses: Sequence[float],
    accuracies: Sequence[float],
    path: str | Path,
    title: str,
    grid: int = 40,
) -> Path:
    """Save a two-panel PNG: the model's P(class 1) over the unit square with the
    training points on top, and loss / accuracy per epoch."""
    xs = np.linspace(0.0, 1.0, grid)
    points = [(float(a), float(b)) for b in xs for a in xs]
    probs = np.asarray(predict(points), dtype=float).reshape(grid, grid)

    fig = Figure(figsize=(11, 4.6))
    ax_b, ax_c = fig.subplots(1, 2)
    mesh = ax_b.contourf(xs, xs, probs, levels=np.linspace(0, 1, 11), cmap="RdBu_r", alpha=0.8)
    ax_b.contour(xs, xs, probs, levels=[0.5], colors="k", linewidths=1.2)
    pts = np.asarray(data.X)
    labels = np.asarray(data.y)
    for label, marker, colour in ((0, "o", "#1f4e99"), (1, "s", "#b2182b")):
        sel = labels == label
        ax_b.scatter(pts[sel, 0], pts[sel, 1], marker=marker, c=colour, edgecolors="w", s=36)
    ax_b.set(xlim=(0, 1), ylim=(0, 1), xlabel="x1", ylabel="x2", aspect="equal")
    ax_b.set_title(f"{data.name}: decision boundary (P = 0.5)")
    fig.colorbar(mesh, ax=ax_b, label="P(class 1)")

    epochs = np.arange(1, len(losses) + 1)
    ax_c.plot(epochs, losses, color="#b2182b", label="loss")
    ax_c.set(xlabel="epoch", ylabel="mean loss", yscale="log")
    ax_acc = ax_c.twinx()
    ax_acc.plot(epochs, np.asarray(accuracies) * 100.0, color="#1f4e99", label="accuracy")
    ax_acc.set(ylabel="train accuracy (%)", ylim=(0, 101))
    ax_c.set_title("learning curves")
    handles = ax_c.get_lines() + ax_acc.get_lines()
    ax_c.legend(handles, [str(h.get_label()) for h in handles], loc="center right")
    fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    return out

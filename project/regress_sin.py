"""Fit sin(x) on [-3, 3] with a tensor MLP and mean squared error.

    python -m project.regress_sin [--backend simple] [--hidden 16] [--epochs 300]

A 1-hidden-hidden-1 MLP (ReLU) learns the curve from ``--points`` evenly spaced samples
with Adam, full batch. Prints the loss as it goes and the time per epoch, and saves
``runs/sin/figure.png``: the fit against sin(x), and the loss per epoch.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from rich.console import Console

from module0.autodiff import no_grad
from module0.optim import Adam
from module1.tensor import Tensor, from_numpy
from module1.tensor_nn import MLP
from module1.tensor_ops import TensorBackend
from project.guard import require_stages
from project.train import STAGES_OF_BACKEND, TENSOR_BACKENDS


@dataclass
class Fit:
    """What a run produced."""

    losses: list[float] = field(default_factory=list)
    seconds_per_epoch: float = 0.0
    figure_path: Path | None = None


def mse(prediction: Tensor, target: Tensor) -> Tensor:
    """Mean squared error."""
    diff = prediction - target
    return (diff * diff).mean()


def fit_sin(
    backend: TensorBackend,
    hidden: int = 16,
    epochs: int = 300,
    points: int = 64,
    lr: float = 0.01,
    seed: int = 0,
    console: Console | None = None,
    log_every: int = 50,
    dtype: str = "float64",
) -> tuple[MLP, Fit]:
    """Train the MLP on ``points`` samples of sin over [-3, 3] in ``dtype``; return it
    and the curve."""
    console = console or Console()
    xs = np.linspace(-3.0, 3.0, points).reshape(-1, 1)
    X = from_numpy(xs, backend, dtype=dtype)
    y = from_numpy(np.sin(xs), backend, dtype=dtype)
    model = MLP((1, hidden, hidden, 1), seed=seed, backend=backend)
    model.to(dtype)
    optimizer = Adam(model.parameters(), lr=lr)
    fit = Fit()
    start = time.perf_counter()
    for e in range(1, epochs + 1):
        loss = mse(model(X), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        fit.losses.append(loss.item())
        if e % log_every == 0 or e == epochs:
            console.print(f"epoch {e:4d}  mse {fit.losses[-1]:.5f}")
    fit.seconds_per_epoch = (time.perf_counter() - start) / epochs
    return model, fit


def plot_fit(model: MLP, fit: Fit, backend: TensorBackend, path: Path) -> Path:
    """Save the fitted curve over sin(x) and the loss per epoch."""
    grid = np.linspace(-3.0, 3.0, 200).reshape(-1, 1)
    with no_grad():
        dtype = next(iter(model.parameters())).value.dtype
        predicted = model(from_numpy(grid, backend, dtype=dtype)).to_numpy()[:, 0]
    fig = Figure(figsize=(10, 4))
    ax_fit, ax_loss = fig.subplots(1, 2)
    ax_fit.plot(grid[:, 0], np.sin(grid[:, 0]), color="#999999", lw=3, label="sin(x)")
    ax_fit.plot(grid[:, 0], predicted, color="#b2182b", lw=1.5, label="MLP")
    ax_fit.set(xlabel="x", ylabel="y", title="fit on [-3, 3]")
    ax_fit.legend()
    ax_loss.plot(np.arange(1, len(fit.losses) + 1), fit.losses, color="#1f4e99")
    ax_loss.set(xlabel="epoch", ylabel="mean squared error", yscale="log", title="loss")
    fig.suptitle(f"sin regression (final MSE {fit.losses[-1]:.2e})")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--backend", default="simple", choices=sorted(TENSOR_BACKENDS))
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=300)
    ap.add_argument("--points", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--out",
        type=Path,
        default=Path("runs"),
        help="the runs folder: writes OUT/sin/ (default: runs)",
    )
    ap.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    ns = ap.parse_args(argv)
    require_stages(*STAGES_OF_BACKEND[ns.backend])
    if min(ns.hidden, ns.epochs, ns.points) < 1:
        ap.error("--hidden, --epochs and --points must be positive")
    console = Console()
    backend = TENSOR_BACKENDS[ns.backend]
    model, fit = fit_sin(
        backend, ns.hidden, ns.epochs, ns.points, ns.lr, ns.seed, console, dtype=ns.dtype
    )
    fit.figure_path = plot_fit(model, fit, backend, ns.out / "sin" / "figure.png")
    console.print(
        f"final mse {fit.losses[-1]:.5f}, {fit.seconds_per_epoch * 1000:.1f} ms per epoch; "
        f"figure: {fit.figure_path}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

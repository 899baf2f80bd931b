"""Learning curves of several training runs in one figure, to compare them.

    python -m project.compare_runs runs/digits runs/digits-bn --out runs/digits_vs_bn.png

Reads each run folder's ``log.csv`` (written by :func:`project.cnn_train.fit`) and draws
two panels side by side: cross-entropy per epoch (train dashed, test solid) and test
accuracy per epoch, one colour per run, labelled with the folder's name (or
``--labels``). The chapter's ``docs/figures/digits_batchnorm.png`` (the digits CNN with
and without ``--batchnorm``) is drawn by this script.
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator


def read_log(run: Path) -> dict[str, list[float]]:
    """A run's ``log.csv`` as columns of floats; ValueError naming a missing file."""
    path = run / "log.csv"
    if not path.is_file():
        raise ValueError(f"{path} does not exist: pass a run folder a training script wrote")
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{path} holds no epoch")
    return {key: [float(row[key]) for row in rows] for key in rows[0]}


def plot_runs(
    runs: Sequence[Path], labels: Sequence[str], path: Path, title: str, gate: float | None = None
) -> Path:
    """The figure described in the module's docstring, saved to ``path``; ``gate`` (a
    fraction of 1) draws the accuracy a gate asks for as a dotted line."""
    fig = Figure(figsize=(11, 4.2))
    ax_loss, ax_acc = fig.subplots(1, 2)
    for i, (run, label) in enumerate(zip(runs, labels, strict=True)):
        log = read_log(run)
        colour = f"C{i}"
        ax_loss.plot(log["epoch"], log["train_loss"], "--", color=colour, label=f"{label} train")
        ax_loss.plot(log["epoch"], log["test_loss"], "-", color=colour, label=f"{label} test")
        final = f"{label} (final {100 * log['test_acc'][-1]:.1f}%)"
        accuracy = [100 * a for a in log["test_acc"]]
        ax_acc.plot(log["epoch"], accuracy, "-", marker=".", color=colour, label=final)
    if gate is not None:
        ax_acc.axhline(100 * gate, color="grey", linestyle=":", label=f"gate {100 * gate:g}%")
    ax_loss.set(xlabel="epoch", ylabel="cross-entropy", yscale="log", title="loss")
    ax_acc.set(xlabel="epoch", ylabel="test accuracy (%)", title="test accuracy")
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m project.compare_runs",
                                description=__doc__.split("\n")[0])  # fmt: skip
    p.add_argument("runs", type=Path, nargs="+", help="run folders holding a log.csv")
    p.add_argument("--labels", nargs="+", help="one label per run (the folders' names)")
    p.add_argument("--out", type=Path, required=True, help="the PNG to write")
    p.add_argument("--title", default="learning curves", help="the figure's title")
    p.add_argument("--gate", type=float, help="draw this test accuracy (0.95 = 95%%) as a line")
    args = p.parse_args(argv)
    labels = args.labels or [run.name for run in args.runs]
    if len(labels) != len(args.runs):
        p.error(f"{len(labels)} labels for {len(args.runs)} runs")
    try:
        print(f"wrote {plot_runs(args.runs, labels, args.out, args.title, args.gate)}")
    except ValueError as error:
        print(error)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

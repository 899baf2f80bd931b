"""Draw a Scalar's computation graph to a PNG with matplotlib (no Graphviz needed).

Leaves sit in the left column, the output in the right; each operation is a box naming
its function and value, each arrow an input. After ``backward()`` leaves also show their
derivative, so a learner can see the chain rule's result on the graph itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from module0.scalar import Scalar

MAX_NODES = 120


def _collect(output: Scalar) -> list[Scalar]:
    """Every Scalar the output was computed from, itself included (any order)."""
    seen = {output.unique_id: output}
    stack = [output]
    while stack:
        history = stack.pop().history
        if history is None:
            continue
        for parent in history.inputs:
            if parent.unique_id not in seen:
                seen[parent.unique_id] = parent  # type: ignore[assignment]
                stack.append(parent)  # type: ignore[arg-type]
    return list(seen.values())


def _label(node: Scalar) -> str:
    if node.history is not None:
        head = node.history.last_fn.__name__
    elif node.requires_grad:
        head = node.name or "leaf"
    else:
        head = "const"
    text = f"{head}\n{node.data:.4g}"
    if node.history is None and node.derivative is not None:
        text += f"\ngrad {node.derivative:.4g}"
    return text


def draw_graph(output: Scalar, path: str | Path, title: str | None = None) -> Path:
    """Write the computation graph that produced ``output`` to ``path`` (PNG).

    Raises ValueError for graphs over ``MAX_NODES`` nodes, which no picture makes
    readable: draw a smaller expression instead.
    """
    nodes = _collect(output)
    if len(nodes) > MAX_NODES:
        raise ValueError(
            f"draw_graph: the graph has {len(nodes)} nodes; at most {MAX_NODES} can be drawn "
            "legibly, so draw a smaller expression"
        )
    # Column = length of the longest path from a leaf; creation order is topological.
    nodes.sort(key=lambda n: n.unique_id)
    column: dict[int, int] = {}
    for node in nodes:
        parents = node.history.inputs if node.history is not None else ()
        column[node.unique_id] = 1 + max((column[p.unique_id] for p in parents), default=-1)
    # A constant sits just left of its first consumer rather than among the leaves.
    for node in nodes:
        for parent in node.history.inputs if node.history is not None else ():
            if not parent.requires_grad and parent.history is None:
                column[parent.unique_id] = max(column[parent.unique_id], column[node.unique_id] - 1)
    by_column: dict[int, list[Scalar]] = {}
    for node in nodes:
        by_column.setdefault(column[node.unique_id], []).append(node)
    position: dict[int, tuple[float, float]] = {}
    for col, members in sorted(by_column.items()):
        for row, node in enumerate(members):
            position[node.unique_id] = (float(col), (len(members) - 1) / 2.0 - row)

    width = max(4.0, 2.2 * len(by_column))
    height = max(3.0, 1.1 * max(len(m) for m in by_column.values()))
    # Imported here: matplotlib takes about a second to import, and only drawing needs it.
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch

    fig = Figure(figsize=(width, height))
    ax = fig.add_subplot()
    ax.set_axis_off()
    for node in nodes:
        if node.history is None:
            continue
        x1, y1 = position[node.unique_id]
        for parent in node.history.inputs:
            x0, y0 = position[parent.unique_id]
            ax.add_patch(
                FancyArrowPatch(
                    (x0, y0),
                    (x1, y1),
                    arrowstyle="-|>",
                    mutation_scale=12,
                    shrinkA=22,
                    shrinkB=22,
                    color="0.35",
                )
            )
    colours = {"op": "#cfe2ff", "leaf": "#d1f2d1", "const": "#eeeeee"}
    for node in nodes:
        x, y = position[node.unique_id]
        kind = "op" if node.history is not None else ("leaf" if node.requires_grad else "const")
        ax.text(
            x,
            y,
            _label(node),
            ha="center",
            va="center",
            fontsize=8,
            bbox={"boxstyle": "round,pad=0.4", "facecolor": colours[kind], "edgecolor": "0.3"},
        )
    ax.set_xlim(-0.6, len(by_column) - 0.4)
    ys = [p[1] for p in position.values()]
    ax.set_ylim(min(ys) - 0.7, max(ys) + 0.7)
    if title:
        ax.set_title(title)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    return out

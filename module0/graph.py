"""Draw a computation graph to a PNG with matplotlib (no Graphviz needed).

Stage 0 draws Scalars with :func:`draw_graph`: leaves sit in the left column, the output
in the right; each operation is a box naming its function and value, each arrow an
input. After ``backward()`` leaves also show their derivative, so a learner can see the
chain rule's result on the graph itself.

The layout and drawing (:class:`Box`, :func:`render`) take any graph of labelled boxes,
so stage 1's tensor graphs (``module1.graph``) are drawn by the same code: boxes in
layers by the longest path from a source, sources placed just before their first use,
each layer's boxes ordered to keep arrows short, every box sized to its text.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

if TYPE_CHECKING:
    from module0.autodiff import Variable
    from module0.scalar import Scalar

V = TypeVar("V", bound="Variable")

MAX_NODES = 120
"""The most boxes a drawing takes: past that no picture is readable."""

COLOURS = {"op": "#cfe2ff", "leaf": "#d1f2d1", "const": "#eeeeee", "module": "#fde0c5"}
"""Box colours by kind: operations blue, leaves green, constants grey, modules orange."""


@dataclass(frozen=True)
class Box:
    """One box of a drawing: a key unique in the graph, its text (lines split by
    ``\\n``), its kind (a key of :data:`COLOURS`) and the keys of the boxes its input
    arrows come from."""

    key: int
    label: str
    kind: str
    inputs: tuple[int, ...] = ()


def check_size(count: int, what: str, advice: str) -> None:
    """ValueError when ``count`` boxes are too many to draw legibly."""
    if count > MAX_NODES:
        raise ValueError(
            f"draw_graph: the graph has {count} {what}; at most {MAX_NODES} can be drawn "
            f"legibly, so {advice}"
        )


def layers(boxes: Sequence[Box], floating: frozenset[str]) -> dict[int, int]:
    """Each box's layer: one more than its deepest input's (sources at 0). A source
    whose kind is in ``floating``, and a box that reads only such (a weight's
    transpose), moves down to just before its first user instead, so a constant or a
    bias enters next to where it is used. ``boxes`` must be ordered inputs before users
    (creation order is)."""
    layer: dict[int, int] = {}
    users: dict[int, list[int]] = {}
    afloat: set[int] = set()
    for box in boxes:
        layer[box.key] = 1 + max((layer[k] for k in box.inputs), default=-1)
        users[box.key] = []
        for k in box.inputs:
            users[k].append(box.key)
        if all(k in afloat for k in box.inputs) if box.inputs else box.kind in floating:
            afloat.add(box.key)
    for box in reversed(boxes):  # users first, so a floating chain moves as one
        if box.key in afloat and users[box.key]:
            first_use = min(layer[u] for u in users[box.key])
            layer[box.key] = max(layer[box.key], first_use - 1)
    return layer


def _orders(
    keys: list[int], layer: dict[int, int], inputs: dict[int, list[int]], sweeps: int = 4
) -> list[list[int]]:
    """The keys of each layer, ordered to keep arrows short and uncrossed: creation
    order first, then sweeps that sort each layer by the mean position of its boxes'
    inputs (downward) and users (upward), a box with neither keeping its place."""
    rows: list[list[int]] = [[] for _ in range(1 + max(layer.values(), default=0))]
    for k in keys:
        rows[layer[k]].append(k)
    users: dict[int, list[int]] = {k: [] for k in keys}
    for k in keys:
        for i in inputs[k]:
            users[i].append(k)

    def sort(row: list[int], neighbours: dict[int, list[int]], place: dict[int, float]) -> None:
        keyed = []
        for i, k in enumerate(row):
            seen = [place[n] for n in neighbours[k] if n in place]
            keyed.append((sum(seen) / len(seen) if seen else float(i), i, k))
        row[:] = [k for _, _, k in sorted(keyed)]

    def place(chosen: list[list[int]]) -> dict[int, float]:
        return {k: i - (len(r) - 1) / 2.0 for r in chosen for i, k in enumerate(r)}

    for _ in range(sweeps):
        for n in range(1, len(rows)):
            sort(rows[n], inputs, place(rows[n - 1 : n]))
        for n in range(len(rows) - 2, -1, -1):
            sort(rows[n], users, place(rows[n + 1 : n + 2]))
    return rows


def _bands(
    rows: list[list[int]],
    thick: list[float],
    inputs: dict[int, list[int]],
    gap: float,
    widest: float,
    max_width: float,
) -> list[int]:
    """The band each layer goes into: the layers cut into ``count`` runs of about equal
    height, ``count`` making the drawing about square but no wider than ``max_width``
    (0: one band); each cut at the layer boundary fewest arrows cross near its ideal
    place."""
    total = sum(thick) + gap * (len(rows) - 1)
    fits = int((max_width + 0.5) // (widest + 0.8)) if max_width else 1
    count = max(1, min(fits, round(math.sqrt(total / max(widest, 0.5) / 1.2)), len(rows)))
    band = [0] * len(rows)
    if count == 1:
        return band
    crossing = [len([i for k in rows[n + 1] for i in inputs[k]]) for n in range(len(rows) - 1)]
    ends = list(itertools.accumulate(t + gap for t in thick))
    cuts: list[int] = []
    for b in range(1, count):
        ideal = total * b / count
        window = [n for n in range(len(rows) - 1) if abs(ends[n] - ideal) < total / count / 3]
        window = [n for n in window if not cuts or n > cuts[-1]] or [
            min(range(len(rows) - 1), key=lambda n: abs(ends[n] - ideal))
        ]
        cuts.append(min(window, key=lambda n: (crossing[n], abs(ends[n] - ideal))))
    for n in range(len(rows)):
        band[n] = sum(1 for c in cuts if n > c)
    return band


def render(
    boxes: Sequence[Box],
    path: str | Path,
    *,
    title: str | None = None,
    direction: Literal["LR", "TB"] = "LR",
    floating: frozenset[str] = frozenset({"const"}),
    fontsize: float = 8.0,
    dpi: int = 110,
    max_width: float = 9.0,
) -> Path:
    """Draw ``boxes`` (ordered inputs before users) to the PNG ``path``: layers left to
    right (``"LR"``) or top to bottom (``"TB"``), arrows from each input to its user.

    An arrow that skips layers runs through a waypoint in each layer it crosses, laid
    out like a narrow box, so it passes between boxes rather than through them. A tall
    top-to-bottom drawing is folded into side-by-side bands (up to ``max_width``
    inches wide, as square as that allows), cut where fewest arrows cross."""
    layer = layers(boxes, floating)
    inputs: dict[int, list[int]] = {}
    keys = [box.key for box in boxes]
    routes: list[list[int]] = []  # each arrow: its input, waypoints, its user
    waypoint = min(keys, default=0) - 1
    for box in boxes:
        inputs[box.key] = []
        for k in box.inputs:
            route = [k]
            for n in range(layer[k] + 1, layer[box.key]):
                waypoint -= 1  # below every box key, so never one of them
                keys.append(waypoint)
                layer[waypoint], inputs[waypoint] = n, [route[-1]]
                route.append(waypoint)
            inputs[box.key].append(route[-1])
            routes.append([*route, box.key])
    rows = _orders(keys, layer, inputs)
    # Sizes in inches, from the text: a monospaced font makes a line's width exact.
    char_w, line_h, pad = 0.6 * fontsize / 72, 1.25 * fontsize / 72, 0.45 * fontsize / 72
    size: dict[int, tuple[float, float]] = {k: (0.06, 0.0) for k in keys}  # waypoints
    for box in boxes:
        lines = box.label.split("\n")
        size[box.key] = (max(map(len, lines)) * char_w + 2 * pad, len(lines) * line_h + 2 * pad)
    across = 1 if direction == "LR" else 0  # the size index across the flow
    gap_along, gap_across, margin = 0.4, 0.16, 0.15
    heading = 0.3 if title else 0.0
    spans = [sum(size[k][across] for k in row) + gap_across * (len(row) - 1) for row in rows]
    widest = max(spans, default=0.0)
    thick = [max((size[k][1 - across] for k in row), default=0.0) for row in rows]
    band = _bands(rows, thick, inputs, gap_along, widest, max_width if direction == "TB" else 0)
    band_gap = 0.5
    title_h = heading
    lanes = max((sum(len(inputs[k]) for k in rows[n]) for n in range(1, len(rows))
                 if band[n] != band[n - 1]), default=0)  # fmt: skip
    heading += 0.06 * lanes  # room above the bands for the arrows between them
    centre: dict[int, tuple[float, float]] = {}
    bottom: list[float] = []  # where each band ends along the flow
    depth = margin
    for n, (row, span) in enumerate(zip(rows, spans, strict=True)):
        if n and band[n] != band[n - 1]:
            bottom.append(depth - gap_along)
            depth = margin
        offset = margin + (widest - span) / 2 + band[n] * (widest + band_gap)
        for k in row:
            a, b = depth + thick[n] / 2, offset + size[k][across] / 2
            centre[k] = (a, b + heading) if direction == "LR" else (b, a + heading)
            offset += size[k][across] + gap_across
        depth += thick[n] + gap_along
    bottom.append(depth - gap_along)
    count = band[-1] + 1 if band else 1
    below = 0.06 * lanes + 0.06 if lanes else 0.0  # room under the bands for those arrows
    extent = (max(bottom) + margin + below, count * widest + (count - 1) * band_gap + 2 * margin)
    width, height = extent if direction == "LR" else extent[::-1]
    width = max(width, 2.0)
    # Imported here: matplotlib takes about a second to import, and only drawing needs it.
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    from matplotlib.path import Path as Line

    fig = Figure(figsize=(width, height + heading))
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_axis_off()
    ax.set_xlim(0.0, width)
    ax.set_ylim(height + heading, 0.0)  # y grows downward, as the layers of "TB" do

    def port(k: int, out: bool) -> tuple[float, float]:
        """Where an arrow leaves (``out``) or enters box ``k``."""
        (x, y), (w, h) = centre[k], size[k]
        sign = 1 if out else -1
        return (x + sign * w / 2, y) if direction == "LR" else (x, y + sign * h / 2)

    # Arrows from one band to the next go down past the band's end, across the gap and
    # up over the next band's top, each in a lane of its own: the arrow from the
    # rightmost box nearest the bands, so no two cross (sources and targets in one order).
    lane: dict[tuple[int, int], int] = {}
    for n in range(1, len(rows)):
        if band[n] != band[n - 1]:
            pairs = [(i, k) for k in rows[n] for i in inputs[k]]
            pairs.sort(key=lambda p: (-centre[p[0]][0], -centre[p[1]][0]))
            lane |= {p: j for j, p in enumerate(pairs)}
    for route in routes:
        points = [port(route[0], True)]
        for a, b in itertools.pairwise(route):
            end = port(b, False) if b == route[-1] else centre[b]
            if band[layer[a]] != band[layer[b]]:
                n, j = band[layer[a]], lane[a, b]
                low = bottom[n] + heading + 0.12 + 0.06 * j
                top = title_h + 0.06 * (lanes - j)
                gap = margin + (n + 1) * (widest + band_gap) - band_gap / 2 + 0.06 * j
                points += [(points[-1][0], low), (gap, low), (gap, top), (end[0], top)]
            points.append(end)
        ax.add_patch(
            FancyArrowPatch(
                path=Line(points),
                arrowstyle="-|>",
                mutation_scale=9,
                linewidth=0.8,
                color="0.35",
            )
        )
    for box in boxes:
        (x, y), (w, h) = centre[box.key], size[box.key]
        ax.add_patch(
            FancyBboxPatch(
                (x - w / 2, y - h / 2),
                w,
                h,
                boxstyle="round,pad=0,rounding_size=0.05",
                facecolor=COLOURS[box.kind],
                edgecolor="0.3",
                linewidth=0.8,
            )
        )
        ax.text(x, y, box.label, ha="center", va="center", fontsize=fontsize,
                family="DejaVu Sans Mono", linespacing=1.25)  # fmt: skip
    if title:
        ax.text(width / 2, title_h / 2 + 0.05, title, ha="center", va="center",
                fontsize=fontsize + 2)  # fmt: skip
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi)
    return out


# ## Stage 0: Scalars


def collect(output: V) -> list[V]:
    """Every Variable the output was computed from, itself included, in creation order
    (Scalars here; stage 1's tensor graphs use it too)."""
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
    return sorted(seen.values(), key=lambda n: n.unique_id)


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
    nodes = collect(output)
    check_size(len(nodes), "nodes", "draw a smaller expression")
    boxes = [
        Box(
            node.unique_id,
            _label(node),
            "op" if node.history is not None else ("leaf" if node.requires_grad else "const"),
            tuple(p.unique_id for p in node.history.inputs) if node.history is not None else (),
        )
        for node in nodes
    ]
    return render(boxes, path, title=title)

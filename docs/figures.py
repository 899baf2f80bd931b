"""Draw the course's explanatory diagrams into ``docs/figures/``.

One matplotlib script draws every figure the stage READMEs link to:

- ``strides_view_permute.png``: storage, shape and strides, and a permuted view (stage 1);
- ``slicing_view.png``: ``x[1:, ::2]`` as a view: its offset and strides (1);
- ``broadcasting.png``: a ``(3, 1) + (4,)`` broadcast and the entries one output reads (1);
- ``packed_matmul.png``: row and column panels, packing and the rank-1 micro-kernel (2);
- ``conv_unfold.png``: conv1d and conv2d as a product with the unfolded input (4);
- ``cuda_grid.png``: blocks, threads and the global index ``i`` of a CUDA launch (3);
- ``causal_mask.png``, ``gpt_block.png``, ``kv_cache.png``: the causal mask (with a
  cache), the shapes through a transformer block, what a KV cache keeps (5);
- ``ring_all_reduce.png``: the ring all-reduce's chunks step by step on 3 ranks (6);
- ``half_formats.png``: float32, bfloat16 and float16 bit by bit, and bfloat16 as the
  upper half of a float32 (6).

(The computation-graph figures, ``graph_*.png``, are drawn by the framework itself:
``docs/graphs.py``.)

The figures are diagrams, not data: everything is drawn from fixed coordinates with the
Agg backend, so a run gives the same files. Regenerate them all with::

    .venv/bin/python docs/figures.py
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

OUT_DIR = Path(__file__).resolve().parent / "figures"
DPI = 100
WIDTH_IN = 8.0  # 800 px wide at DPI

# One palette for every figure.
INK = "#222222"
MUTED = "#6b6b6b"
EDGE = "#4d4d4d"
BACKGROUND = "#ffffff"
STORAGE = "#f0f0f0"
IDLE = "#e3e3e3"
A_COLOR = "#9ecae1"  # first input / A
A_DARK = "#3182bd"
B_COLOR = "#b8e186"  # second input / B
B_DARK = "#4d9221"
OUT_COLOR = "#fdd0a2"  # output / C
OUT_DARK = "#e6550d"
HIGHLIGHT = "#d62728"  # the one entry a figure follows
ENTRY_COLORS = ("#8dd3c7", "#ffed6f", "#bebada", "#fb8072", "#80b1d3", "#fdb462")

plt.rcParams.update(
    {
        "font.family": "DejaVu Sans",
        "font.size": 11,
        "figure.facecolor": BACKGROUND,
        "savefig.facecolor": BACKGROUND,
        "text.color": INK,
    }
)


def new_figure(xmax: float, ymax: float, ymin: float = 0.0) -> tuple[Figure, Axes]:
    """A figure WIDTH_IN wide whose axes span data units [0, xmax] x [ymin, ymax], 1:1."""
    fig = plt.figure(figsize=(WIDTH_IN, WIDTH_IN * (ymax - ymin) / xmax))
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_xlim(0, xmax)
    ax.set_ylim(ymin, ymax)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def save(fig: Figure, name: str) -> Path:
    """Write the figure as OUT_DIR/name without version metadata, and close it."""
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / name
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    return path


def cell(
    ax: Axes,
    x: float,
    y: float,
    text: str = "",
    *,
    w: float = 1.0,
    h: float = 1.0,
    fc: str = STORAGE,
    ec: str = EDGE,
    lw: float = 1.2,
    ls: str = "-",
    alpha: float = 1.0,
    size: float = 12,
    color: str = INK,
    weight: str = "normal",
) -> None:
    """A rectangle with lower-left corner (x, y) and optional centred text."""
    ax.add_patch(Rectangle((x, y), w, h, fc=fc, ec=ec, lw=lw, ls=ls, alpha=alpha, zorder=2))
    if text:
        ax.text(
            x + w / 2,
            y + h / 2,
            text,
            ha="center",
            va="center",
            fontsize=size,
            color=color,
            weight=weight,
            zorder=4,
        )


def outline(
    ax: Axes,
    x: float,
    y: float,
    w: float,
    h: float,
    *,
    color: str = HIGHLIGHT,
    lw: float = 2.6,
    ls: str = "-",
) -> None:
    """A coloured frame drawn over cells, to single one out."""
    ax.add_patch(Rectangle((x, y), w, h, fc="none", ec=color, lw=lw, ls=ls, zorder=5))


def arrow(
    ax: Axes,
    start: tuple[float, float],
    end: tuple[float, float],
    *,
    color: str = HIGHLIGHT,
    rad: float = 0.0,
    lw: float = 1.8,
    ls: str = "-",
    head: float = 12,
) -> None:
    """An arrow from start to end, bent by rad (0 is straight)."""
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=head,
            color=color,
            lw=lw,
            ls=ls,
            connectionstyle=f"arc3,rad={rad}",
            shrinkA=0,
            shrinkB=0,
            zorder=6,
        )
    )


def bracket(
    ax: Axes, x0: float, x1: float, y: float, *, color: str, tick: float = 0.18, lw: float = 2.2
) -> None:
    """A horizontal bracket from x0 to x1 at height y, its ticks pointing up."""
    ax.plot(
        [x0, x0, x1, x1],
        [y + tick, y, y, y + tick],
        color=color,
        lw=lw,
        solid_capstyle="butt",
        zorder=3,
    )


def label(
    ax: Axes,
    x: float,
    y: float,
    text: str,
    *,
    size: float = 11,
    color: str = INK,
    ha: str = "center",
    va: str = "center",
    weight: str = "normal",
    rotation: float = 0.0,
) -> None:
    """Plain text at (x, y)."""
    ax.text(
        x,
        y,
        text,
        ha=ha,
        va=va,
        fontsize=size,
        color=color,
        weight=weight,
        rotation=rotation,
        zorder=7,
    )


# ---------------------------------------------------------------------------------------
# (a) storage, strides, permute


def strides_view_permute() -> Path:
    """A (2, 3) view of six numbers and its permute(1, 0), both reading one storage."""
    fig, ax = new_figure(14.0, 9.6)
    letters = "abcdef"

    label(ax, 7.0, 9.05, r"position $=\ \sum_d\ $index$[d]\cdot$strides$[d]$", size=14)

    def view(x0: float, top: float, shape: tuple[int, int], strides: tuple[int, int]) -> None:
        rows, cols = shape
        for i in range(rows):
            for j in range(cols):
                pos = i * strides[0] + j * strides[1]
                x, y = x0 + j, top - 1 - i
                cell(ax, x, y, fc=ENTRY_COLORS[pos])
                label(ax, x + 0.5, y + 0.42, letters[pos], size=15, weight="bold")
                label(ax, x + 0.5, y + 0.82, f"({i}, {j})", size=8, color=MUTED)
        for j in range(cols):
            label(ax, x0 + j + 0.5, top + 0.25, f"j={j}", size=9, color=MUTED)
        for i in range(rows):
            label(ax, x0 - 0.35, top - 0.5 - i, f"i={i}", size=9, color=MUTED)

    # the original (2, 3) view
    label(ax, 3.0, 8.0, "shape (2, 3), strides (3, 1)", size=12, weight="bold")
    view(1.5, 7.0, (2, 3), (3, 1))
    outline(ax, 3.5, 5.0, 1.0, 1.0)
    label(ax, 3.0, 4.45, "(1, 2):  1·3 + 2·1 = 5", size=11, color=HIGHLIGHT)

    # its permute(1, 0)
    label(ax, 11.0, 8.0, "shape (3, 2), strides (1, 3)", size=12, weight="bold")
    view(10.0, 7.0, (3, 2), (1, 3))
    outline(ax, 11.0, 4.0, 1.0, 1.0)
    label(ax, 11.0, 3.45, "(2, 1):  2·1 + 1·3 = 5", size=11, color=HIGHLIGHT)

    arrow(ax, (5.1, 6.0), (9.2, 6.0), color=EDGE, lw=2.0, head=16)
    label(ax, 7.15, 6.45, "permute(1, 0)", size=12, weight="bold")
    label(
        ax,
        7.15,
        5.55,
        "swap shape and strides:\nno copy, same storage",
        size=10,
        color=MUTED,
        va="top",
    )

    # the one storage both read
    sx, sy = 4.0, 0.8
    label(ax, sx - 0.25, sy + 0.5, "storage", size=12, ha="right", weight="bold")
    label(ax, sx - 0.25, sy - 0.35, "position", size=10, ha="right", color=MUTED)
    for p, letter in enumerate(letters):
        cell(ax, sx + p, sy, letter, fc=ENTRY_COLORS[p], size=15, weight="bold")
        label(ax, sx + p + 0.5, sy - 0.35, str(p), size=10, color=MUTED)
    outline(ax, sx + 5, sy, 1.0, 1.0)

    arrow(ax, (4.0, 5.0), (sx + 5.3, sy + 1.05), rad=0.15)
    arrow(ax, (11.5, 4.0), (sx + 5.7, sy + 1.05), rad=-0.1)
    return save(fig, "strides_view_permute.png")


def slicing_view() -> Path:
    """``x[1:, ::2]`` of a (3, 4) tensor: a view at offset 4 with strides (4, 2), reading
    four of the twelve storage positions."""
    fig, ax = new_figure(16.0, 9.6)
    picked = {4: (0, 0), 6: (0, 1), 8: (1, 0), 10: (1, 1)}
    title = r"x[1:, ::2]:  offset $=$ 1·4 + 0·1 $=$ 4,   strides $=$ (4·1, 1·2) $=$ (4, 2)"
    label(ax, 8.0, 9.35, title, size=13)

    # the (3, 4) tensor, the selected entries coloured
    label(ax, 3.5, 8.55, "x: shape (3, 4), strides (4, 1)", size=12, weight="bold")
    for i in range(3):
        for j in range(4):
            pos = i * 4 + j
            x, y = 1.5 + j, 6.8 - i
            cell(ax, x, y, str(pos), fc=A_COLOR if pos in picked else STORAGE, size=13)
    for j in range(4):
        label(ax, 2.0 + j, 8.05, f"j={j}", size=9, color=MUTED)
    for i in range(3):
        label(ax, 1.1, 7.3 - i, f"i={i}", size=9, color=MUTED)

    # the view
    label(ax, 12.5, 8.55, "x[1:, ::2]: shape (2, 2), strides (4, 2)", size=12, weight="bold")
    for pos, (i, j) in picked.items():
        x, y = 11.5 + j, 6.8 - i
        cell(ax, x, y, str(pos), fc=A_COLOR, size=13, weight="bold")
        label(ax, x + 0.5, y + 0.83, f"({i}, {j})", size=8, color=MUTED)
    label(ax, 12.4, 4.3, "(1, 1):  4 + 1·4 + 1·2 = 10", size=11, color=HIGHLIGHT, ha="right")
    outline(ax, 12.5, 5.8, 1.0, 1.0)
    arrow(ax, (6.0, 6.3), (10.8, 6.3), color=EDGE, lw=2.0, head=16)
    label(ax, 8.4, 6.75, "basic indexing", size=12, weight="bold")
    label(ax, 8.4, 5.85, "no copy: new offset,\nshape and strides", size=10, color=MUTED,
          va="top")  # fmt: skip

    # the one storage: the view starts at position 4
    sx, sy = 2.0, 1.2
    label(ax, sx - 0.25, sy + 0.5, "storage", size=12, ha="right", weight="bold")
    for pos in range(12):
        cell(ax, sx + pos, sy, str(pos), fc=A_COLOR if pos in picked else STORAGE, size=12)
    bracket(ax, sx + 0.05, sx + 3.95, sy - 0.25, color=MUTED, tick=-0.18)
    label(ax, sx + 2.0, sy - 0.65, "offset 4", size=10, color=MUTED)
    for a, b in ((4, 6), (8, 10)):
        ax.annotate("", xy=(sx + b + 0.5, sy + 1.05), xytext=(sx + a + 0.5, sy + 1.05),
                    arrowprops={"arrowstyle": "-|>", "color": A_DARK, "lw": 1.6,
                                "connectionstyle": "arc3,rad=-0.5"})  # fmt: skip
        label(ax, sx + (a + b) / 2 + 0.5, sy + 1.95, "j+1: +2", size=9, color=A_DARK)
    ax.annotate("", xy=(sx + 8.5, sy - 0.05), xytext=(sx + 4.5, sy - 0.05),
                arrowprops={"arrowstyle": "-|>", "color": OUT_DARK, "lw": 1.6,
                            "connectionstyle": "arc3,rad=0.35"})  # fmt: skip
    label(ax, sx + 6.5, sy - 1.0, "i+1: +4", size=9, color=OUT_DARK)
    arrow(ax, (13.0, 5.8), (sx + 10.5, sy + 1.1), rad=-0.15)
    return save(fig, "slicing_view.png")


# ---------------------------------------------------------------------------------------
# (b) broadcasting


def broadcasting() -> Path:
    """a (3, 1) + b (4,) = out (3, 4): align on the right, stretch size 1 with stride 0."""
    fig, ax = new_figure(16.0, 11.4)

    # Step 1: line the shapes up on the right.
    label(ax, 0.3, 10.9, "1. line the shapes up on the right", size=12, ha="left", weight="bold")
    c0, c1, w = 2.2, 3.3, 1.0  # left edges of dims 0 and 1
    label(ax, c0 + w / 2, 10.25, "dim 0", size=9, color=MUTED)
    label(ax, c1 + w / 2, 10.25, "dim 1", size=9, color=MUTED)
    label(ax, 4.8, 10.25, "strides  →  strides read as (3, 4)", size=9, color=MUTED, ha="left")
    rows = [
        ("a", 9.2, ("3", A_COLOR, "-"), ("1", A_COLOR, "-"), "(1, 1)  →  (1, 0)"),
        ("b", 8.0, ("1", "#ffffff", "--"), ("4", B_COLOR, "-"), "(1,)  →  (0, 1)"),
        ("out", 6.8, ("3", OUT_COLOR, "-"), ("4", OUT_COLOR, "-"), "(4, 1)"),
    ]
    for name, y, d0, d1, strides in rows:
        label(ax, c0 - 0.25, y + 0.45, name, size=12, ha="right", weight="bold")
        for x, (text, fc, ls) in ((c0, d0), (c1, d1)):
            cell(ax, x, y, text, w=w, h=0.9, fc=fc, ls=ls, size=13)
        label(ax, 4.8, y + 0.45, strides, size=11, ha="left")
    label(
        ax,
        9.4,
        9.65,
        "dim 1: size 1 against 4, stretched: stride 0",
        size=10,
        ha="left",
        color=A_DARK,
    )
    label(
        ax,
        9.4,
        8.45,
        "missing dim 0 added as size 1,\nstretched to 3: stride 0",
        size=10,
        ha="left",
        color=B_DARK,
    )
    label(
        ax, 9.4, 7.25, "each dimension: the size that is not 1", size=10, ha="left", color=OUT_DARK
    )

    # Step 2: the stretched inputs and the output.
    label(
        ax,
        0.3,
        5.95,
        "2. every output entry reads one entry of each input",
        size=12,
        ha="left",
        weight="bold",
    )
    s = 1.02  # cell size
    top = 5.15

    def grid(
        x0: float,
        text: Callable[[int, int], str],
        fc: Callable[[int, int], str],
        stored: Callable[[int, int], bool],
        size: float = 11,
    ) -> None:
        for i in range(3):
            for j in range(4):
                real = stored(i, j)
                cell(
                    ax,
                    x0 + j * s,
                    top - (i + 1) * s,
                    text(i, j),
                    w=s,
                    h=s,
                    fc=fc(i, j),
                    ls="-" if real else ":",
                    alpha=1.0 if real else 0.45,
                    size=size,
                    color=INK if real else MUTED,
                )
        for j in range(4):
            label(ax, x0 + (j + 0.5) * s, top + 0.22, str(j), size=8, color=MUTED)
        for i in range(3):
            label(ax, x0 - 0.2, top - (i + 0.5) * s, str(i), size=8, color=MUTED)

    ax0, bx0, ox0 = 0.55, 5.95, 11.35
    grid(ax0, lambda i, j: f"a{i}", lambda i, j: A_COLOR, lambda i, j: j == 0)
    grid(bx0, lambda i, j: f"b{j}", lambda i, j: B_COLOR, lambda i, j: i == 0)
    grid(ox0, lambda i, j: f"a{i}+b{j}", lambda i, j: OUT_COLOR, lambda i, j: True, size=9.5)
    label(ax, (ax0 + 4 * s + bx0) / 2, top - 1.5 * s, "+", size=22)
    label(ax, (bx0 + 4 * s + ox0) / 2, top - 1.5 * s, "=", size=22)
    bottom = top - 3 * s
    label(ax, ax0 + 2 * s, bottom - 0.35, "a (3, 1) read as (3, 4)", size=11, weight="bold")
    label(ax, bx0 + 2 * s, bottom - 0.35, "b (4,) read as (3, 4)", size=11, weight="bold")
    label(ax, ox0 + 2 * s, bottom - 0.35, "out (3, 4)", size=11, weight="bold")

    # out[2, 1] and what it reads
    outline(ax, ox0 + 1 * s, bottom, s, s)
    outline(ax, ax0 + 1 * s, bottom, s, s, ls="--", lw=2.0)
    outline(ax, ax0, bottom, s, s)
    arrow(ax, (ax0 + 1.5 * s, bottom + 0.2 * s), (ax0 + 0.75 * s, bottom + 0.2 * s), head=10)
    outline(ax, bx0 + 1 * s, bottom, s, s, ls="--", lw=2.0)
    outline(ax, bx0 + 1 * s, top - s, s, s)
    arrow(ax, (bx0 + 1.8 * s, bottom + 0.5 * s), (bx0 + 1.8 * s, top - 0.25 * s), head=10)
    label(ax, 8.0, 0.95, "out[2, 1] = a[2, 0] + b[1]", size=12, color=HIGHLIGHT, weight="bold")
    label(
        ax,
        8.0,
        0.35,
        "index (2, 1), a's strides (1, 0): 2·1 + 1·0 = 2 → a[2, 0];"
        "   b's strides (0, 1): 2·0 + 1·1 = 1 → b[1]",
        size=10.5,
        color=HIGHLIGHT,
    )
    return save(fig, "broadcasting.png")


# ---------------------------------------------------------------------------------------
# (c) packed matrix product


def packed_matmul() -> Path:
    """Row panels of A, column panels of B, packing, and the rank-1 micro-kernel."""
    fig, ax = new_figure(18.0, 10.6)

    # A (M x K) on the left, B (K x N) on top, C (M x N) where they meet.
    k_len, m, n = 2.4, 5.6, 5.6  # drawing units
    mr, nr = 1.4, 1.4
    a_x0, c_x0, c_y0 = 1.0, 4.0, 0.9
    b_y0 = c_y0 + m + 0.6
    a_py = c_y0 + m - mr  # the highlighted row panel of A: the first
    b_px = c_x0 + n - nr  # the highlighted column panel of B: the last
    p_frac = 0.55  # where column / row p sits along K
    stripe = 0.2

    cell(ax, a_x0, c_y0, w=k_len, h=m, fc=A_COLOR, lw=1.6)
    for r in range(1, round(m / mr)):
        ax.plot([a_x0, a_x0 + k_len], [c_y0 + r * mr] * 2, color=EDGE, lw=1.0, zorder=3)
    cell(ax, a_x0, a_py, w=k_len, h=mr, fc=A_DARK, alpha=0.55, lw=1.6)
    cell(ax, a_x0 + p_frac * k_len, a_py, w=stripe, h=mr, fc=A_DARK, lw=0.8)
    label(ax, a_x0 + k_len / 2, c_y0 - 0.4, "A  (M × K)", size=12, weight="bold")
    label(ax, a_x0 - 0.15, a_py + mr / 2, "MR", size=11, ha="right", color=A_DARK, weight="bold")
    label(ax, a_x0 + p_frac * k_len + stripe / 2, a_py - 0.25, "p", size=10, color=A_DARK)

    cell(ax, c_x0, b_y0, w=n, h=k_len, fc=B_COLOR, lw=1.6)
    for c in range(1, round(n / nr)):
        ax.plot([c_x0 + c * nr] * 2, [b_y0, b_y0 + k_len], color=EDGE, lw=1.0, zorder=3)
    cell(ax, b_px, b_y0, w=nr, h=k_len, fc=B_DARK, alpha=0.5, lw=1.6)
    b_row_y = b_y0 + k_len - p_frac * k_len - stripe
    cell(ax, b_px, b_row_y, w=nr, h=stripe, fc=B_DARK, lw=0.8)
    label(ax, b_px - 0.2, b_row_y + stripe / 2, "p", size=10, color=B_DARK)
    label(ax, c_x0 + n / 2, b_y0 + k_len + 0.35, "B  (K × N)", size=12, weight="bold")
    label(ax, b_px + nr / 2, b_y0 - 0.3, "NR", size=11, color=B_DARK, weight="bold")

    cell(ax, c_x0, c_y0, w=n, h=m, fc="#ffffff", lw=1.6)
    for r in range(1, round(m / mr)):
        ax.plot([c_x0, c_x0 + n], [c_y0 + r * mr] * 2, color=IDLE, lw=0.9, zorder=3)
    for c in range(1, round(n / nr)):
        ax.plot([c_x0 + c * nr] * 2, [c_y0, c_y0 + m], color=IDLE, lw=0.9, zorder=3)
    cell(ax, b_px, a_py, "tile", w=nr, h=mr, fc=OUT_COLOR, lw=1.6, size=11)
    outline(ax, b_px, a_py, nr, mr, color=OUT_DARK, lw=2.4)
    label(ax, c_x0 + n / 2, c_y0 - 0.4, "C  (M × N)", size=12, weight="bold")

    def strip(x0: float, y: float, gw: float, fc: str, dark: str, group: str) -> None:
        for s_i, step in enumerate(("0", "1", "p", "…", "K−1")):
            is_p = step == "p"
            cell(
                ax,
                x0 + s_i * gw,
                y,
                "…" if step == "…" else group,
                w=gw,
                h=0.6,
                fc=dark if is_p else fc,
                size=9,
                color="#ffffff" if is_p else INK,
                weight="bold" if is_p else "normal",
            )
            label(ax, x0 + (s_i + 0.5) * gw, y + 0.82, step, size=9, color=MUTED)

    # Packing: each panel copied once into a contiguous buffer, one step of k after another.
    strip(0.55, b_y0 + 0.3, 0.64, A_COLOR, A_DARK, "MR")
    label(
        ax, 0.55 + 2.5 * 0.64, b_y0 + 1.55, "packed A panel:\nK columns of MR", size=10, va="bottom"
    )
    arrow(
        ax,
        (a_x0 + k_len / 2, a_py + mr + 0.05),
        (a_x0 + k_len / 2, b_y0 + 0.25),
        color=A_DARK,
        lw=1.6,
    )
    label(ax, a_x0 + k_len / 2 + 0.15, c_y0 + m + 0.3, "pack", size=9, color=A_DARK, ha="left")
    strip(11.2, b_y0 + 0.9, 1.1, B_COLOR, B_DARK, "NR")
    label(ax, 11.2 + 2.5 * 1.1, b_y0 + 2.3, "packed B panel: K rows of NR", size=10)
    arrow(ax, (c_x0 + n + 0.05, b_y0 + 1.2), (11.15, b_y0 + 1.2), color=B_DARK, lw=1.6)
    label(ax, 10.4, b_y0 + 0.9, "pack", size=9, color=B_DARK)
    label(ax, 13.95, b_y0 + 0.4, "one contiguous buffer, in order of k", size=9, color=MUTED)

    # The micro-kernel: one MR x NR tile of C from K rank-1 updates.
    label(ax, 13.95, 5.85, "micro-kernel: the tile in registers", size=12, weight="bold")
    tx0, ty0, tw, th = 12.3, 1.75, 3.6, 2.6
    cell(ax, tx0, ty0, "C tile\nMR × NR", w=tw, h=th, fc=OUT_COLOR, lw=1.6, size=12)
    outline(ax, tx0, ty0, tw, th, color=OUT_DARK, lw=2.4)
    cell(ax, tx0 - 0.65, ty0, w=0.4, h=th, fc=A_DARK, lw=1.0)
    label(ax, tx0 - 0.95, ty0 + th / 2, "column p of A (MR)", size=9, color=A_DARK, rotation=90)
    cell(ax, tx0, ty0 + th + 0.25, w=tw, h=0.4, fc=B_DARK, lw=1.0)
    label(ax, tx0 + tw / 2, ty0 + th + 0.95, "row p of B (NR)", size=9, color=B_DARK)
    label(ax, 13.95, 0.95, r"for p = 0 … K−1:  tile += col $p$ $\otimes$ row $p$", size=11)
    label(ax, 13.95, 0.45, "K rank-1 updates (outer products)", size=9, color=MUTED)
    arrow(
        ax,
        (c_x0 + n + 0.05, a_py + mr / 2),
        (tx0 - 0.3, ty0 + th + 0.45),
        color=OUT_DARK,
        rad=-0.25,
        lw=1.5,
        ls="--",
    )
    return save(fig, "packed_matmul.png")


# ---------------------------------------------------------------------------------------
# (d) convolution as a product with the unfolded input


def conv_unfold() -> Path:
    """conv1d (length 7, width 3) and conv2d (5 x 5, 3 x 3) as rows of an unfolded matrix."""
    fig, ax = new_figure(16.0, 14.2, ymin=-0.6)
    window_colors = (A_DARK, B_DARK, OUT_DARK)

    # ---- 1-D
    label(
        ax,
        0.3,
        13.75,
        "conv1d: input of length 7, kernel width 3  →  5 outputs",
        size=12,
        ha="left",
        weight="bold",
    )
    xx0, xy = 0.5, 11.6
    for i in range(7):
        cell(ax, xx0 + i, xy, f"x{i}", fc=A_COLOR, size=12)
    label(ax, xx0 + 3.5, xy + 1.35, "input x", size=10, color=MUTED)
    for j, color in enumerate(window_colors):
        y = xy - 0.35 - 0.45 * j
        bracket(ax, xx0 + j + 0.08, xx0 + j + 3 - 0.08, y, color=color)
        label(ax, xx0 + j + 3.15, y + 0.02, f"window j={j}", size=9, color=color, ha="left")
    label(
        ax,
        xx0 + 3.5,
        xy - 1.95,
        "… and j = 3, 4: each output reads 3 neighbours",
        size=9,
        color=MUTED,
    )

    ux0, cs = 8.6, 0.75
    utop = 12.95
    label(ax, ux0 + 1.5 * cs, utop + 0.35, r"$U(x)^T$: one row per window", size=10)
    for j in range(5):
        for k in range(3):
            known = j < 3
            cell(
                ax,
                ux0 + k * cs,
                utop - (j + 1) * cs,
                f"x{j + k}",
                w=cs,
                h=cs,
                fc=A_COLOR if known else STORAGE,
                size=10,
                color=INK if known else MUTED,
            )
        if j < 3:
            outline(ax, ux0, utop - (j + 1) * cs, 3 * cs, cs, color=window_colors[j], lw=2.2)
        label(ax, ux0 - 0.2, utop - (j + 0.5) * cs, f"j={j}", size=8, color=MUTED, ha="right")
    mid = utop - 2.5 * cs
    label(ax, ux0 + 3 * cs + 0.35, mid, "·", size=22)
    wx0 = ux0 + 3 * cs + 0.7
    for k in range(3):
        cell(ax, wx0, mid + 1.5 * cs - (k + 1) * cs, f"w{k}", w=cs, h=cs, fc=B_COLOR, size=10)
    label(ax, wx0 + cs / 2, mid - 1.5 * cs - 0.3, "weights", size=9, color=MUTED)
    label(ax, wx0 + cs + 0.4, mid, "=", size=18)
    yx0 = wx0 + cs + 0.8
    for j in range(5):
        cell(ax, yx0, utop - (j + 1) * cs, f"y{j}", w=cs, h=cs, fc=OUT_COLOR, size=10)
    label(ax, yx0 + cs / 2, utop - 5 * cs - 0.3, "outputs", size=9, color=MUTED)
    label(
        ax,
        ux0 + 3.0,
        utop - 5 * cs - 0.75,
        "row j holds window j:  y[j] = Σ_k w[k] · x[j + k]",
        size=10,
    )
    ax.plot([0.3, 15.7], [7.55, 7.55], color=IDLE, lw=1.2)

    # ---- 2-D
    label(
        ax,
        0.3,
        7.0,
        "conv2d: a 3 × 3 window slides over a 5 × 5 input  →  3 × 3 outputs",
        size=12,
        ha="left",
        weight="bold",
    )
    letters = "abcdefghijklmnopqrstuvwxy"
    g0x, g_top, gs = 0.8, 6.2, 1.0
    wr, wc = 1, 2  # the highlighted window's top-left corner = its output position
    for r in range(5):
        for c in range(5):
            inside = wr <= r < wr + 3 and wc <= c < wc + 3
            cell(
                ax,
                g0x + c * gs,
                g_top - (r + 1) * gs,
                letters[r * 5 + c],
                w=gs,
                h=gs,
                fc=A_DARK if inside else A_COLOR,
                alpha=0.85 if inside else 1.0,
                size=12,
                color="#ffffff" if inside else INK,
            )
    outline(ax, g0x + wc * gs, g_top - (wr + 3) * gs, 3 * gs, 3 * gs, color=OUT_DARK, lw=3.0)
    label(ax, g0x + 2.5 * gs, g_top - 5 * gs - 0.35, "input x (one channel)", size=10, color=MUTED)

    o0x, os_ = 6.6, 0.6
    o_top = 4.4
    for r in range(3):
        for c in range(3):
            on = (r, c) == (wr, wc)
            cell(
                ax,
                o0x + c * os_,
                o_top - (r + 1) * os_,
                w=os_,
                h=os_,
                fc=OUT_DARK if on else OUT_COLOR,
            )
    label(ax, o0x + 1.5 * os_, o_top + 0.35, "outputs 3 × 3", size=9, color=MUTED)
    label(
        ax,
        o0x + 1.5 * os_,
        o_top - 3 * os_ - 0.35,
        f"position ({wr}, {wc})",
        size=9,
        color=OUT_DARK,
    )
    arrow(
        ax,
        (g0x + 5 * gs + 0.05, g_top - 1.2),
        (o0x + 2.5 * os_, o_top - 1.0 * os_ + 0.02),
        color=OUT_DARK,
        rad=-0.35,
        lw=1.5,
    )

    u0x, us = 9.7, 0.62
    u_top = 6.2
    row_hi = wr * 3 + wc
    window = [letters[(wr + dr) * 5 + wc + dc] for dr in range(3) for dc in range(3)]
    for j in range(9):
        for t in range(9):
            on = j == row_hi
            cell(
                ax,
                u0x + t * us,
                u_top - (j + 1) * us,
                window[t] if on else "",
                w=us,
                h=us,
                fc=A_DARK if on else STORAGE,
                alpha=0.85 if on else 1.0,
                size=10,
                color="#ffffff",
                lw=0.8,
            )
        label(ax, u0x - 0.15, u_top - (j + 0.5) * us, str(j), size=7, color=MUTED, ha="right")
    outline(ax, u0x, u_top - (row_hi + 1) * us, 9 * us, us, color=OUT_DARK, lw=2.4)
    label(ax, u0x + 4.5 * us, u_top + 0.3, r"$U(x)^T$: 9 windows × C$_{in}$·kh·kw columns", size=10)
    label(
        ax,
        u0x + 4.5 * us,
        u_top - 9 * us - 0.35,
        f"row {row_hi} = window ({wr}, {wc}) flattened, row-major",
        size=10,
        color=OUT_DARK,
    )
    label(
        ax,
        u0x + 4.5 * us,
        u_top - 9 * us - 0.95,
        "(C$_{in}$ = 1 here)  × flattened weights  =  9 outputs",
        size=10,
    )
    arrow(
        ax,
        (o0x + 3 * os_ + 0.05, o_top - 1.5 * os_),
        (u0x - 0.45, u_top - 5.5 * us),
        color=OUT_DARK,
        rad=0.0,
        lw=1.5,
    )
    return save(fig, "conv_unfold.png")


# ---------------------------------------------------------------------------------------
# (e) CUDA launch geometry


def cuda_grid() -> Path:
    """3 blocks of 8 threads over an array of 20: i = blockIdx.x * blockDim.x + threadIdx.x."""
    fig, ax = new_figure(16.0, 8.2)
    size, per_block, blocks = 20, 8, 3
    w = 0.56
    x0 = 16.0 - 0.4 - blocks * per_block * w  # room on the left for the row labels
    block_fc = (A_COLOR, B_COLOR, OUT_COLOR)
    block_dark = (A_DARK, B_DARK, OUT_DARK)
    hi_block, hi_thread = 1, 5
    hi = hi_block * per_block + hi_thread

    label(ax, 8.0, 7.7, "i = blockIdx.x * blockDim.x + threadIdx.x", size=14, weight="bold")
    label(
        ax,
        8.0,
        7.15,
        "grid of 3 blocks, blockDim.x = 8: 24 threads for an array of 20",
        size=11,
        color=MUTED,
    )

    ty = 4.9  # thread cells
    for b in range(blocks):
        bx = x0 + b * per_block * w
        ax.add_patch(
            FancyBboxPatch(
                (bx + 0.06, ty - 0.3),
                per_block * w - 0.12,
                1.55,
                boxstyle="round,pad=0.02,rounding_size=0.15",
                fc=block_fc[b],
                ec=block_dark[b],
                lw=2.0,
                alpha=0.5,
                zorder=1,
            )
        )
        label(
            ax,
            bx + per_block * w / 2,
            ty + 1.6,
            f"block {b}  (blockIdx.x = {b})",
            size=10,
            color=block_dark[b],
            weight="bold",
        )
        for t in range(per_block):
            i = b * per_block + t
            active = i < size
            cell(
                ax,
                bx + t * w + 0.04,
                ty,
                str(t),
                w=w - 0.08,
                h=0.7,
                fc="#ffffff" if active else IDLE,
                ec=block_dark[b] if active else MUTED,
                ls="-" if active else ":",
                size=10,
                color=INK if active else MUTED,
            )
    label(ax, x0 - 0.15, ty + 0.35, "threadIdx.x", size=9, color=MUTED, ha="right")

    iy = 4.2  # the global index under every thread
    label(ax, x0 - 0.15, iy, "i", size=11, color=MUTED, ha="right", weight="bold")
    ay = 2.2  # the array
    for i in range(blocks * per_block):
        cx = x0 + (i + 0.5) * w
        active = i < size
        label(ax, cx, iy, str(i), size=9, color=INK if active else MUTED)
        if active:
            color = HIGHLIGHT if i == hi else MUTED
            arrow(
                ax,
                (cx, iy - 0.22),
                (cx, ay + 0.75),
                color=color,
                lw=2.0 if i == hi else 0.9,
                head=10 if i == hi else 7,
            )
            cell(ax, x0 + i * w, ay, str(i), w=w, h=0.7, fc=STORAGE, size=9)
        else:
            label(ax, cx, ay + 1.4, "✕", size=12, color=HIGHLIGHT)
    label(ax, x0 - 0.15, ay + 0.35, "array", size=10, color=INK, ha="right", weight="bold")
    label(ax, x0 + 22 * w, ay + 0.35, "no element:\ni >= size", size=9, color=HIGHLIGHT)

    outline(ax, x0 + hi * w + 0.04, ty, w - 0.08, 0.7)
    outline(ax, x0 + hi * w, ay, w, 0.7)
    label(
        ax,
        x0 + (hi + 0.5) * w,
        1.35,
        f"block {hi_block}, thread {hi_thread}:  i = {hi_block}·8 + {hi_thread} = {hi}",
        size=11,
        color=HIGHLIGHT,
    )
    label(
        ax,
        8.0,
        0.5,
        "block 2's threads 4-7 (i = 20 … 23) are past the end: "
        "every kernel starts with  if i >= size: return",
        size=10,
        color=MUTED,
    )
    return save(fig, "cuda_grid.png")


def causal_mask() -> Path:
    """Scores of 6 queries over 6 keys with the causal mask, and the same for the last 2
    queries over a cache of 6 keys: query i sees keys j <= i + S - T."""
    fig, ax = new_figure(16.0, 8.6)
    label(ax, 8.0, 8.2, "Causal attention: each query sees its own position and the past",
          size=13, weight="bold")  # fmt: skip

    def grid(x0: float, y_top: float, t: int, s: int, title: str) -> None:
        w = 0.78
        label(ax, x0 + s * w / 2, y_top + 0.75, title, size=11)
        for j in range(s):
            label(ax, x0 + (j + 0.5) * w, y_top + 0.3, f"k{j}", size=9, color=MUTED)
        for i in range(t):
            pos = i + s - t
            label(ax, x0 - 0.35, y_top - (i + 0.5) * w, f"q{pos}", size=9, color=MUTED)
            for j in range(s):
                seen = j <= i + s - t
                cell(ax, x0 + j * w, y_top - (i + 1) * w, "" if seen else "0",
                     w=w, h=w, fc=A_COLOR if seen else IDLE, ec=EDGE,
                     size=9, color=MUTED)  # fmt: skip

    grid(1.2, 6.9, 6, 6, "T = S = 6: the lower triangle")
    grid(9.6, 6.9, 2, 6, "a KV cache: T = 2 new queries, S = 6 keys")
    outline(ax, 9.6 + 4 * 0.78, 6.9 - 0.78, 0.78, 0.78)
    label(ax, 12.0, 4.6, "q4 (the first new position) sees k0 ... k4,\nnot k5: j <= i + S - T",
          size=10, color=HIGHLIGHT)  # fmt: skip
    cell(ax, 9.6, 2.9, "", w=0.6, h=0.45, fc=A_COLOR)
    label(ax, 10.4, 3.12, "kept: softmax over these", size=10, ha="left")
    cell(ax, 9.6, 2.2, "0", w=0.6, h=0.45, fc=IDLE, size=9, color=MUTED)
    label(ax, 10.4, 2.42, "masked: exactly 0 after the softmax", size=10, ha="left")
    label(ax, 8.0, 0.7, "causal_mask(T, S) = np.tril(ones((T, S)), k = S - T)", size=11,
          color=MUTED)  # fmt: skip
    return save(fig, "causal_mask.png")


def gpt_block() -> Path:
    """The shapes through one pre-LayerNorm block, with the heads split and merged."""
    fig, ax = new_figure(16.0, 10.0)
    label(ax, 8.0, 9.6, "One transformer block: shapes of x through attention and the MLP",
          size=13, weight="bold")  # fmt: skip
    steps = [
        ("x", "(B, T, C)", STORAGE),
        ("ln_1", "(B, T, C)", B_COLOR),
        ("c_attn: Linear(C, 3C)", "(B, T, 3C)", A_COLOR),
        ("split, view, permute", "3 × (B, H, T, D)", A_COLOR),
        ("softmax(q kᵀ / √D) v, causal", "(B, H, T, D)", OUT_COLOR),
        ("permute, view: merge heads", "(B, T, C)", A_COLOR),
        ("c_proj: Linear(C, C)", "(B, T, C)", A_COLOR),
    ]
    y = 8.5
    for i, (what, shape, fc) in enumerate(steps):
        cell(ax, 0.6, y - 0.7, what, w=5.2, h=0.7, fc=fc, size=10)
        label(ax, 6.1, y - 0.35, shape, size=10, ha="left", color=MUTED)
        if i:
            arrow(ax, (3.2, y + 0.15), (3.2, y), color=EDGE, head=8, lw=1.2)
        y -= 1.0
    label(ax, 3.2, y - 0.05, "x = x + (that)", size=11, weight="bold", color=HIGHLIGHT)
    mlp = [
        ("ln_2", "(B, T, C)", B_COLOR),
        ("c_fc: Linear(C, 4C)", "(B, T, 4C)", A_COLOR),
        ("GELU", "(B, T, 4C)", OUT_COLOR),
        ("c_proj: Linear(4C, C)", "(B, T, C)", A_COLOR),
    ]
    y = 8.5
    for i, (what, shape, fc) in enumerate(mlp):
        cell(ax, 9.2, y - 0.7, what, w=4.4, h=0.7, fc=fc, size=10)
        label(ax, 13.85, y - 0.35, shape, size=10, ha="left", color=MUTED)
        if i:
            arrow(ax, (11.4, y + 0.15), (11.4, y), color=EDGE, head=8, lw=1.2)
        y -= 1.0
    label(ax, 11.4, y - 0.05, "x = x + (that)", size=11, weight="bold", color=HIGHLIGHT)
    arrow(ax, (4.6, 1.45), (9.1, 8.15), color=HIGHLIGHT, rad=0.35, lw=1.6)
    label(ax, 8.3, 3.3, "then", size=10, color=HIGHLIGHT)
    label(ax, 11.6, 2.6, "B sequences, T positions, C = n_embd,\nH heads of D = C / H channels",
          size=10, color=MUTED)  # fmt: skip
    return save(fig, "gpt_block.png")


def kv_cache() -> Path:
    """Decoding step by step: the cache keeps every earlier key and value; a new token
    computes its own and attends to all."""
    fig, ax = new_figure(16.0, 7.2)
    label(ax, 8.0, 6.8, "Generating with a KV cache: one new position per step",
          size=13, weight="bold")  # fmt: skip
    w = 0.9
    x0 = 2.2
    for row, (name, y) in enumerate((("values", 4.6), ("keys", 3.4))):
        label(ax, x0 - 0.3, y + 0.35, name, size=11, ha="right")
        for j in range(6):
            new = j == 5
            cell(ax, x0 + j * w, y, f"{name[0]}{j}", w=w, h=0.7,
                 fc=OUT_COLOR if new else B_COLOR, size=10)  # fmt: skip
        if row == 0:
            bracket(ax, x0, x0 + 5 * w, y + 0.95, color=B_DARK)
            label(ax, x0 + 2.5 * w, y + 1.35, "cached (steps 0 … 4)", size=10, color=B_DARK)
    cell(ax, x0 + 5 * w, 1.8, "q5", w=w, h=0.7, fc=OUT_COLOR, size=10)
    label(ax, x0 + 5.5 * w, 1.35, "the new token's query", size=9, color=OUT_DARK)
    for j in range(6):
        arrow(ax, (x0 + 5.5 * w, 2.5), (x0 + (j + 0.5) * w, 3.4), color=MUTED, lw=0.9, head=7)
    tx = 8.4
    label(ax, tx, 5.3, "each step:", size=11, ha="left", weight="bold")
    lines = [
        "1. run the model on the new token alone (T = 1)",
        "2. cat its key and value onto the cache (S = 6)",
        "3. its query attends to all S keys;",
        "    the weights average the S values",
        "4. sample the next token from the logits",
        "work per token: O(S), not a whole forward",
        "over the context again (O(S²) attention)",
    ]
    for i, text in enumerate(lines):
        label(ax, tx, 4.7 - 0.5 * i, text, size=10, ha="left",
              color=INK if i < 5 else MUTED)  # fmt: skip
    return save(fig, "kv_cache.png")


def ring_all_reduce() -> Path:
    """The ring all-reduce on 3 ranks: each rank's 3 chunks, before and after each step
    of the reduce-scatter and the all-gather (which ranks' parts each chunk holds)."""
    k = 3
    fig, ax = new_figure(16.0, 5.6)
    label(ax, 8.0, 5.25, "Ring all-reduce, 3 ranks: rank r sends to rank r + 1 (mod 3)",
          size=13, weight="bold")  # fmt: skip
    state = [[{r} for _ in range(k)] for r in range(k)]  # state[rank][chunk]
    panels = [("start", state, set())]
    for phase, name in (("reduce", "reduce-scatter"), ("gather", "all-gather")):
        for step in range(k - 1):
            new = [[set(c) for c in row] for row in state]
            changed = set()
            for r in range(k):
                right = (r + 1) % k
                chunk = (r - step) % k if phase == "reduce" else (r + 1 - step) % k
                if phase == "reduce":
                    new[right][chunk] |= state[r][chunk]
                else:
                    new[right][chunk] = set(state[r][chunk])
                changed.add((right, chunk))
            state = new
            panels.append((f"{name}\nstep {step}", state, changed))
    w, h, gap, x0 = 0.78, 0.72, 0.62, 1.2
    for p, (title, cells, changed) in enumerate(panels):
        px = x0 + p * (k * w + gap)
        label(ax, px + k * w / 2, 4.25, title, size=10)
        for c in range(k):
            label(ax, px + (c + 0.5) * w, 3.7, "abc"[c], size=10, color=MUTED)
        for r in range(k):
            y = 2.9 - r * h
            if p == 0:
                label(ax, px - 0.15, y + h / 2, f"rank {r}", size=10, ha="right")
            for c in range(k):
                parts = cells[r][c]
                done = len(parts) == k
                text = "all" if done else "+".join(str(i) for i in sorted(parts))
                fill = OUT_COLOR if done else (B_COLOR if len(parts) > 1 else STORAGE)
                cell(ax, px + c * w, y, text, w=w, h=h, size=9, fc=fill)
                if (r, c) in changed:
                    outline(ax, px + c * w, y, w, h, lw=2.0)
    notes = [
        "a cell: whose parts that chunk holds (\"0+2\": rank 0's and rank 2's, added); "
        "red frame: received in that step",
        "reduce-scatter: add the received chunk to your own; after K - 1 steps each rank "
        "holds one complete chunk",
        "all-gather: store the received chunk; after K - 1 more steps every rank holds "
        "them all, the same bits",
    ]
    for i, text in enumerate(notes):
        label(ax, 0.4, 0.95 - 0.38 * i, text, size=9.5, ha="left", color=INK if i else MUTED)
    return save(fig, "ring_all_reduce.png")


def half_formats() -> Path:
    """float32, bfloat16 and float16: sign, exponent and fraction bits to scale, with
    bfloat16 drawn under the float32 bits it keeps and the 16 it rounds away."""
    fig, ax = new_figure(16.0, 6.6)
    label(ax, 8.0, 6.25, "Three float formats, bit by bit (s: the sign)", size=13,
          weight="bold")  # fmt: skip
    bit, x0 = 0.36, 2.5
    rows = [  # name, y, (sign, exponent, fraction), range and digits
        ("float32", 4.6, (1, 8, 23), "largest 3.4e38, smallest normal 1.2e-38, ~7 digits"),
        ("bfloat16", 2.9, (1, 8, 7), "float32's range, ~3 digits"),
        ("float16", 0.9, (1, 5, 10), "largest 65504, smallest 6.0e-8 (subnormal), ~3 digits"),
    ]
    fills = (OUT_COLOR, A_COLOR, B_COLOR)
    for name, y, widths, note in rows:
        label(ax, x0 - 0.2, y + 0.35, name, size=12, ha="right", weight="bold")
        x = x0
        for field, (n, fill) in enumerate(zip(widths, fills, strict=False)):
            text = ("s", f"exponent {n}", f"fraction {n}")[field]
            cell(ax, x, y, text, w=n * bit, h=0.7, fc=fill, size=10)
            for i in range(1, n):  # a tick per bit
                ax.plot([x + i * bit] * 2, [y, y + 0.12], color=EDGE, lw=0.8, zorder=3)
            x += n * bit
        label(ax, x0, y - 0.3, note, size=9.5, ha="left", color=MUTED)
    top = x0 + 16 * bit
    cell(ax, top, 2.9, "the lower 16 bits: rounded away\n(to the nearest, ties to even)",
         w=16 * bit, h=0.7, fc="none", ec=HIGHLIGHT, ls="--", size=9, color=HIGHLIGHT)  # fmt: skip
    bracket(ax, x0, top, 4.6 + 0.85, color=A_DARK)
    label(ax, (x0 + top) / 2, 5.75, "bfloat16 = these 16 bits", size=10, color=A_DARK)
    return save(fig, "half_formats.png")


FIGURES: Sequence[Callable[[], Path]] = (
    strides_view_permute,
    slicing_view,
    broadcasting,
    packed_matmul,
    conv_unfold,
    cuda_grid,
    causal_mask,
    gpt_block,
    kv_cache,
    ring_all_reduce,
    half_formats,
)


def main() -> None:
    """Draw every figure and print where each went and its size."""
    for draw in FIGURES:
        path = draw()
        print(f"{path.relative_to(OUT_DIR.parent.parent)}  {path.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()

"""A picture (and a text table) of any tensor graph: what each operation made, what it
keeps for backward, which Module made it.

:func:`draw_graph` draws the graph that produced a tensor as a PNG (matplotlib only,
with stage 0's layout): one box per operation, naming its Function, the shape and
dtype it made and the bytes its Context keeps for the backward pass; leaves named
after a Module's parameters, with their gradient's norm once ``backward`` has run.
:func:`graph_summary` gives the same as a table of text.

Which Module made which node is recorded by :func:`record_modules`: while it is active,
every ``Module.__call__`` notes the range of tensor ids created during the call (ids
increase in creation order, so a call's nodes are the ids inside its range, and nested
calls give nested ranges). Nothing is recorded otherwise, and the operations themselves
are untouched. A recorded graph collapses repeated structure: the nodes made inside a
module call deeper than ``depth`` become one box per call (``h0.attn
(MultiHeadAttention)``), so a GPT block or a CNN draws legibly.

Bytes kept for backward: every tensor a Context saved counts its storage's bytes (a
view counts the whole storage it reads), a saved NumPy array its buffer's, and shapes,
numbers and flags nothing. A storage several nodes keep (a parameter used twice, an
input saved by two operations) counts in each node's figure but once in any total.
``backward`` frees what it uses, so draw before it, or pass ``retain_graph=True``.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

import module0.module as module_hooks
from module0.autodiff import next_unique_id
from module0.graph import Box, check_size, collect, render
from module0.graph import draw_graph as draw_scalar_graph
from module0.module import Module
from module1.tensor import Tensor

# ## Recording which Module made which node


@dataclass(frozen=True)
class ModuleCall:
    """One call of a Module while recording: the tensors created during it have ids in
    ``(start, end)``; ``depth`` counts the recorded calls around it (0: outermost)."""

    name: str
    kind: str
    start: int
    end: int
    depth: int
    parent: int | None  # index of the enclosing call in the recording


@dataclass
class Recording:
    """The module calls one :func:`record_modules` block saw, in the order they began."""

    calls: list[ModuleCall] = field(default_factory=list)


_recordings: weakref.WeakKeyDictionary[Module, Recording] = weakref.WeakKeyDictionary()


def _module_names(model: Module) -> dict[int, str]:
    """``id(module) -> dotted name`` for ``model``'s tree (the model itself is "")."""
    names = {id(model): ""}
    pending = [("", model)]
    while pending:
        prefix, module = pending.pop()
        for name, child in module.__dict__["_modules"].items():
            full = f"{prefix}.{name}" if prefix else name
            names.setdefault(id(child), full)
            pending.append((full, child))
    return names


@contextmanager
def record_modules(model: Module) -> Iterator[Recording]:
    """Within this block, note which Module call made each new tensor, so that
    ``draw_graph(out, path, modules=model)`` can draw modules as boxes.

    ``model`` names the modules (by their path in its tree; a module outside the tree
    by its class). Every ``Module.__call__`` runs through the recorder while the block
    is active; outside it nothing is recorded and no call pays more than a comparison.
    """
    if module_hooks.call_hook is not None:
        raise RuntimeError("record_modules: another record_modules block is already active")
    names = _module_names(model)
    recording = Recording()
    open_calls: list[int] = []

    def hook(module: Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        index = len(recording.calls)
        parent = open_calls[-1] if open_calls else None
        kind = type(module).__name__
        name = names.get(id(module), "")
        start = next_unique_id()  # ids only need to increase, so taking one is harmless
        recording.calls.append(ModuleCall(name, kind, start, start, len(open_calls), parent))
        open_calls.append(index)
        try:
            return module.forward(*args, **kwargs)
        finally:
            open_calls.pop()
            call = recording.calls[index]
            recording.calls[index] = ModuleCall(
                call.name, kind, start, next_unique_id(), call.depth, parent
            )

    module_hooks.call_hook = hook
    try:
        yield recording
    finally:
        module_hooks.call_hook = None
        _recordings[model] = recording


# ## The graph as a list of nodes


@dataclass
class GraphNode:
    """One line of :func:`graph_summary`, one box of :func:`draw_graph`: an operation,
    a leaf, or a collapsed module call.

    ``kind`` is ``"op"``, ``"leaf"`` (wants a gradient), ``"const"`` or ``"module"``;
    ``op`` the Function's name (``"leaf"``, ``"const"``, or the module's class);
    ``name`` a leaf's parameter name, or the module that made an operation;
    ``saved_bytes`` what its Contexts keep for backward (None once backward freed it);
    ``grad_norm`` the 2-norm of a leaf's ``.grad`` (of a module box: of the gradients
    of the parameters only it uses); ``ops`` how many operations a module box holds;
    ``inputs`` the keys of the nodes it reads."""

    key: int
    kind: str
    op: str
    name: str
    shape: tuple[int, ...]
    dtype: str
    saved_bytes: int | None
    grad_norm: float | None
    inputs: tuple[int, ...]
    ops: int = 1
    params: int = 0


def _buffers(value: Any, found: dict[int, int]) -> None:
    """Add ``id -> nbytes`` for every buffer ``value`` (something a Context saved) keeps
    alive: a tensor's storage, an array's base buffer; lists and tuples searched."""
    if isinstance(value, Tensor):
        value = value._tensor._storage
    if isinstance(value, list | tuple):
        for item in value:
            _buffers(item, found)
        return
    if isinstance(value, np.ndarray):
        while isinstance(value.base, np.ndarray):
            value = value.base
        found[id(value)] = value.nbytes
    elif hasattr(value, "nbytes") and hasattr(value, "shape"):  # a device array
        found[id(value)] = int(value.nbytes)


def _saved(node: Tensor) -> dict[int, int] | None:
    """The buffers ``node``'s Context keeps for backward (None once released)."""
    history = node.history
    if history is None:
        return {}
    if history.released:
        return None
    found: dict[int, int] = {}
    _buffers(history.saved_values, found)
    return found


def _grad_norm(t: Tensor) -> float | None:
    return None if t.grad is None else float(np.linalg.norm(t.grad.to_numpy()))


def _innermost(uid: int, calls: list[ModuleCall], near: list[int]) -> int | None:
    """The index of the innermost recorded call (among ``near``) during which tensor
    ``uid`` was made."""
    best = None
    for i in near:
        call = calls[i]
        if call.start < uid < call.end and (best is None or call.depth > calls[best].depth):
            best = i
    return best


def _call_name(call: ModuleCall) -> str:
    return f"{call.name} ({call.kind})" if call.name else f"({call.kind})"


def graph_nodes(
    output: Tensor,
    modules: Module | Mapping[str, Tensor] | None = None,
    depth: int | None = 1,
) -> list[GraphNode]:
    """The graph that produced ``output`` as nodes, inputs before users.

    ``modules``: a Module names the leaves that are its parameters (``"h0.attn.c_attn.
    weight"``) and, when its forward ran inside :func:`record_modules` (the latest such
    block for that Module counts), collapses every module call at depth > ``depth``
    (the outermost call is depth 0) into one node;
    ``depth=None`` collapses nothing. A mapping ``name -> tensor`` names leaves only.
    Other leaves are named by their ``name``, else ``"input"`` (wants a gradient) or
    ``"const"``.
    """
    if not isinstance(output, Tensor):
        raise TypeError(f"graph_nodes needs a Tensor, got {type(output).__name__}")
    tensors = collect(output)
    if isinstance(modules, Module):
        named = {id(p.value): name for name, p in modules.named_parameters()}
        recording = _recordings.get(modules)
    else:
        named = {id(t): name for name, t in (modules or {}).items()}
        recording = None
    calls = recording.calls if recording is not None else []
    low, high = tensors[0].unique_id, tensors[-1].unique_id
    near = [i for i, c in enumerate(calls) if c.end > low and c.start < high]

    def box_of(uid: int) -> int | None:
        """The collapsed call ``uid`` belongs to: its enclosing call at depth + 1."""
        if depth is None:
            return None
        i = _innermost(uid, calls, near)
        while i is not None and calls[i].depth > depth + 1:
            i = calls[i].parent
        return i if i is not None and calls[i].depth > depth else None

    # Which box (if any) each tensor falls in; a parameter goes into a box when that
    # box alone reads it.
    owner: dict[int, int | None] = {t.unique_id: box_of(t.unique_id) for t in tensors}
    readers: dict[int, set[int | None]] = {}
    for t in tensors:
        if t.history is not None:
            for p in t.history.inputs:
                readers.setdefault(p.unique_id, set()).add(owner[t.unique_id])
    for t in tensors:
        uid = t.unique_id
        if t.history is None and id(t) in named and owner[uid] is None:
            users = readers.get(uid, set())
            if len(users) == 1 and None not in users:
                owner[uid] = next(iter(users))

    def key_of(uid: int) -> int:
        box = owner[uid]
        return -1 - box if box is not None else uid

    nodes: dict[int, GraphNode] = {}
    box_buffers: dict[int, dict[int, int] | None] = {}
    box_grads: dict[int, list[float]] = {}
    for t in tensors:
        uid = t.unique_id
        key = key_of(uid)
        inputs = (
            tuple(dict.fromkeys(key_of(p.unique_id) for p in t.history.inputs))
            if t.history is not None
            else ()
        )
        inputs = tuple(k for k in inputs if k != key)
        saved = _saved(t)
        if owner[uid] is not None:
            call = calls[owner[uid]]  # type: ignore[index]
            node = nodes.get(key)
            if node is None:
                node = nodes[key] = GraphNode(
                    key, "module", call.kind, _call_name(call), t.shape, str(t.dtype),
                    0, None, (), ops=0,
                )  # fmt: skip
                box_buffers[key] = {}
                box_grads[key] = []
            node.inputs = tuple(dict.fromkeys((*node.inputs, *inputs)))
            if t.history is not None:
                node.ops += 1
                node.shape, node.dtype = t.shape, str(t.dtype)  # the latest result
                buffers = box_buffers[key]
                box_buffers[key] = None if saved is None or buffers is None else buffers | saved
            elif id(t) in named:
                node.params += 1
                norm = _grad_norm(t)
                if norm is not None:
                    box_grads[key].append(norm)
            continue
        if t.history is not None:
            kind, op = "op", t.history.last_fn.__name__
            inner = _innermost(uid, calls, near)
            name = calls[inner].name if inner is not None else ""
        else:
            kind = "leaf" if t.requires_grad else "const"
            name = named.get(id(t)) or t.name or ("input" if t.requires_grad else "const")
            op = kind
        nodes[key] = GraphNode(
            key, kind, op, name, t.shape, str(t.dtype),
            None if saved is None else sum(saved.values()),
            _grad_norm(t) if t.history is None else None, inputs,
            ops=1 if t.history is not None else 0,
        )  # fmt: skip
    for key, buffers in box_buffers.items():
        nodes[key].saved_bytes = None if buffers is None else sum(buffers.values())
        grads = box_grads[key]
        nodes[key].grad_norm = math.sqrt(sum(g * g for g in grads)) if grads else None
    # Inputs before users: a box sorts by its last tensor, which is made after
    # everything it reads and before anything that reads it.
    last: dict[int, int] = {}
    for t in tensors:
        last[key_of(t.unique_id)] = t.unique_id
    return sorted(nodes.values(), key=lambda n: last[n.key])


def saved_total(output: Tensor) -> tuple[int, int]:
    """The bytes the whole graph of ``output`` keeps for backward, each storage counted
    once (nothing for parts backward already freed), and how many of them are the
    leaves' own storage (parameters, inputs: kept alive anyway)."""
    tensors = collect(output)
    found: dict[int, int] = {}
    for t in tensors:
        found |= _saved(t) or {}
    leaves: dict[int, int] = {}
    for t in tensors:
        if t.history is None:
            _buffers(t, leaves)
    return sum(found.values()), sum(n for k, n in found.items() if k in leaves)


# ## Text and picture


def format_bytes(n: int | None) -> str:
    """``"1,536 B"`` below 10 KiB, then ``"12.3 KiB"``, from 1 MiB ``"4.5 MiB"``;
    ``"freed"`` for None (what backward released)."""
    if n is None:
        return "freed"
    if n < 10 * 1024:
        return f"{n:,} B"
    if n < 1024**2:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024**2:.1f} MiB"


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def graph_summary(
    output: Tensor,
    modules: Module | Mapping[str, Tensor] | None = None,
    depth: int | None = 1,
) -> str:
    """The graph of ``output`` as a table, one line per node or collapsed module call
    (see :func:`graph_nodes`): name, operation, output shape, dtype, bytes kept for
    backward, gradient norm; then the totals."""
    nodes = graph_nodes(output, modules, depth)
    rows = [("name", "op", "shape", "dtype", "saved", "grad norm")]
    for node in nodes:
        op = _count(node.ops, "op") if node.kind == "module" else node.op
        rows.append((
            node.name, op, _shape(node.shape), node.dtype,
            format_bytes(node.saved_bytes) if node.kind in ("op", "module") else "",
            f"{node.grad_norm:.4g}" if node.grad_norm is not None else "",
        ))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    ops = sum(n.ops for n in nodes)
    total, of_leaves = saved_total(output)
    lines.append(
        f"{len(nodes)} nodes, {_count(ops, 'operation')}; kept for backward: "
        f"{format_bytes(total)}, each storage counted once ({format_bytes(of_leaves)} "
        "of it leaves' storage: parameters, inputs, constants)"
    )
    return "\n".join(lines)


def _label(node: GraphNode) -> str:
    head = node.name if node.kind in ("leaf", "const", "module") else node.op
    lines = [head, f"{_shape(node.shape)} {node.dtype}"]
    if node.kind == "op" and node.name:
        lines[0] = f"{node.op}"
    if node.kind == "module":
        extra = _count(node.ops, "op")
        if node.params:
            extra += ", " + _count(node.params, "param")
        lines.append(extra)
    if node.kind in ("op", "module") and node.saved_bytes != 0:
        lines.append(f"saved {format_bytes(node.saved_bytes)}")
    if node.grad_norm is not None:
        lines.append(f"|grad| {node.grad_norm:.3g}")
    return "\n".join(lines)


def draw_graph(
    output: Any,
    path: str | Path,
    title: str | None = None,
    *,
    modules: Module | Mapping[str, Tensor] | None = None,
    depth: int | None = 1,
    direction: Literal["LR", "TB"] = "TB",
) -> Path:
    """Write the graph that produced ``output`` to ``path`` (PNG) and return the path.

    A tensor's graph is drawn as :func:`graph_nodes` describes it (``modules`` names
    leaves and, after :func:`record_modules`, collapses module calls deeper than
    ``depth``), top to bottom unless ``direction="LR"``; a Scalar's as stage 0 draws it.
    Raises ValueError for more than ``MAX_NODES`` boxes, suggesting a smaller depth.
    """
    if not isinstance(output, Tensor):
        return draw_scalar_graph(output, path, title=title)
    nodes = graph_nodes(output, modules, depth)
    recorded = isinstance(modules, Module) and modules in _recordings
    if not recorded:
        advice = (
            "run the model inside record_modules(model) and pass modules=model, depth=0 "
            "to draw its modules as boxes, or draw a smaller expression"
        )
    elif depth is None:
        advice = "pass depth=1 (or 0) to collapse modules into boxes"
    elif depth > 0:
        advice = f"pass a smaller depth than {depth} to collapse more modules into boxes"
    else:
        advice = "draw a smaller model or expression (depth=0 collapses all it can)"
    check_size(len(nodes), "nodes", advice)
    boxes = [Box(n.key, _label(n), n.kind, n.inputs) for n in nodes]
    return render(
        boxes, path, title=title, direction=direction, floating=frozenset({"leaf", "const"}),
        fontsize=8.0, dpi=110,
    )  # fmt: skip

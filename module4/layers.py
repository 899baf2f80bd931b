"""Task 4.4 (layers): the building blocks a CNN is made of, and saving a model.

Every layer is a :class:`~module0.module.Module` whose weights are Parameters holding
tensors, so stage 0's optimizers and stage 2's fused ones train them unchanged.

* **Initialisation.** A layer's output variance is the sum of ``fan_in`` products, so
  weights drawn with a fixed spread make activations grow or vanish with depth. He
  (Kaiming) normal, ``std = sqrt(2 / fan_in)``, keeps the variance through ReLU layers;
  Xavier (Glorot) uniform, ``bound = sqrt(6 / (fan_in + fan_out))``, balances forward
  and backward variance for layers without ReLU (the last, logit, layer). Biases start
  at 0. For a convolution, ``fan_in = in_channels * kernel entries``.
* **Sequential** runs its layers in order and :meth:`Sequential.summary` lists each
  layer's output shape and parameter count for an input shape.
* **State dicts.** :func:`state_dict` maps each parameter's dotted name to a NumPy copy
  of its value, and each buffer's (state no optimizer trains: a BatchNorm's running
  statistics, listed by a module's ``buffer_names``) the same way; :func:`save` writes
  one to ``.npz`` atomically (a temporary file in the same folder, renamed over the
  target, so an interrupted save never leaves a half file), and :func:`load` checks
  every name and shape before it changes anything.
"""

from __future__ import annotations

import math
import os
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from module0.autodiff import no_grad
from module0.module import Module, Parameter
from module1 import tensor_nn
from module1.tensor import Tensor, from_numpy
from module1.tensor_data import ShapeError
from module1.tensor_functions import Function
from module1.tensor_ops import TensorBackend
from module2.fast_ops import FastTensorBackend
from module4.fast_conv import conv1d, conv2d
from module4.nn import avgpool2d, dropout, maxpool2d

# BEGIN SOLUTION 4.4 omit
try:  # the reference's fast path for Linear (module4/fast_linear.py; not in a handout)
    from module4 import fast_linear
except ModuleNotFoundError:  # a tree with the reference's layers but not its fast paths
    fast_linear = None  # type: ignore[assignment]
# END SOLUTION

Array = npt.NDArray[np.float64]
INITS = ("he", "xavier")
"""The initialisations a layer accepts by name."""


# ## Initialisation


def he_normal(shape: Sequence[int], fan_in: int, rng: np.random.Generator) -> Array:
    """Normal entries with mean 0 and standard deviation ``sqrt(2 / fan_in)`` (for
    layers followed by ReLU, which zeroes half of its inputs on average)."""
    # BEGIN SOLUTION 4.4
    return rng.normal(0.0, math.sqrt(2.0 / fan_in), tuple(shape))
    # END SOLUTION


def xavier_uniform(
    shape: Sequence[int], fan_in: int, fan_out: int, rng: np.random.Generator
) -> Array:
    """Uniform entries in ``±sqrt(6 / (fan_in + fan_out))``: variance
    ``2 / (fan_in + fan_out)``, between what the forward and the backward pass want."""
    # BEGIN SOLUTION 4.4
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-bound, bound, tuple(shape))
    # END SOLUTION


def init_weight(
    shape: Sequence[int], fan_in: int, fan_out: int, init: str, rng: np.random.Generator
) -> Array:
    """A weight array drawn by the initialisation named ``init`` ("he" or "xavier")."""
    if init == "he":
        return he_normal(shape, fan_in, rng)
    if init == "xavier":
        return xavier_uniform(shape, fan_in, fan_out, rng)
    raise ValueError(f"unknown init {init!r}; choose one of {', '.join(INITS)}")


def _rng(rng: np.random.Generator | None) -> np.random.Generator:
    return rng if rng is not None else np.random.default_rng(0)


# ## Layers


class Linear(tensor_nn.Linear):
    """Stage 1's ``y = x @ weight + bias`` (task 1.5), initialised "he" (the default)
    or "xavier", with a zero bias; ``weight`` is ``(in_size, out_size)``."""

    def __init__(
        self,
        in_size: int,
        out_size: int,
        init: str = "he",
        rng: np.random.Generator | None = None,
        backend: TensorBackend = FastTensorBackend,
    ) -> None:
        rng = _rng(rng)
        super().__init__(in_size, out_size, rng, backend)
        w = init_weight((in_size, out_size), in_size, out_size, init, rng)
        self.weight.update(from_numpy(w, backend))
        self.bias.update(from_numpy(np.zeros(out_size), backend))
        self.init = init

    # BEGIN SOLUTION 4.4 omit
    def forward(self, x: Tensor) -> Tensor:
        """The reference's fast path where it applies, else task 1.5's forward."""
        if fast_linear is not None and isinstance(x, Tensor) and x.dims == 2:
            if x.shape[1] == self.in_size:
                fast = fast_linear.linear(x, self.weight.value, self.bias.value)
                if fast is not None:
                    return fast
        return super().forward(x)

    # END SOLUTION


def _pair(name: str, value: int | Sequence[int]) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2 or not all(isinstance(v, int) for v in pair):
        raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")
    return pair[0], pair[1]


class Conv1d(Module):
    """A 1-D convolution over ``(batch, in_channels, width)`` with a bias per output
    channel; ``weight`` is ``(out_channels, in_channels, kernel_size)``."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        init: str = "he",
        rng: np.random.Generator | None = None,
        backend: TensorBackend = FastTensorBackend,
    ) -> None:
        super().__init__()
        if min(in_channels, out_channels, kernel_size) < 1:
            raise ValueError(
                f"Conv1d sizes must be positive, got in_channels={in_channels}, "
                f"out_channels={out_channels}, kernel_size={kernel_size}"
            )
        shape = (out_channels, in_channels, kernel_size)
        fan_in, fan_out = in_channels * kernel_size, out_channels * kernel_size
        w = init_weight(shape, fan_in, fan_out, init, _rng(rng))
        self.weight = Parameter(from_numpy(w, backend), "weight")
        self.bias = Parameter(from_numpy(np.zeros(out_channels), backend), "bias")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: Tensor) -> Tensor:
        """``(batch, in_channels, width)`` -> ``(batch, out_channels, out_width)``."""
        # BEGIN SOLUTION 4.4
        out = conv1d(x, self.weight.value, self.stride, self.padding)
        return out + self.bias.value.view(1, self.out_channels, 1)
        # END SOLUTION

    def __repr__(self) -> str:
        return (
            f"Conv1d({self.in_channels}, {self.out_channels}, kernel_size="
            f"{self.kernel_size}, stride={self.stride}, padding={self.padding})"
        )


class Conv2d(Module):
    """A 2-D convolution over ``(batch, in_channels, height, width)`` with a bias per
    output channel; ``weight`` is ``(out_channels, in_channels, kh, kw)``."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] = 0,
        init: str = "he",
        rng: np.random.Generator | None = None,
        backend: TensorBackend = FastTensorBackend,
    ) -> None:
        super().__init__()
        kh, kw = _pair("kernel_size", kernel_size)
        if min(in_channels, out_channels, kh, kw) < 1:
            raise ValueError(
                f"Conv2d sizes must be positive, got in_channels={in_channels}, "
                f"out_channels={out_channels}, kernel_size={(kh, kw)}"
            )
        shape = (out_channels, in_channels, kh, kw)
        fan_in, fan_out = in_channels * kh * kw, out_channels * kh * kw
        w = init_weight(shape, fan_in, fan_out, init, _rng(rng))
        self.weight = Parameter(from_numpy(w, backend), "weight")
        self.bias = Parameter(from_numpy(np.zeros(out_channels), backend), "bias")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = (kh, kw)
        self.stride, self.padding = _pair("stride", stride), _pair("padding", padding)

    def forward(self, x: Tensor) -> Tensor:
        """``(batch, in_channels, h, w)`` -> ``(batch, out_channels, out_h, out_w)``."""
        # BEGIN SOLUTION 4.4
        out = conv2d(x, self.weight.value, self.stride, self.padding)
        return out + self.bias.value.view(1, self.out_channels, 1, 1)
        # END SOLUTION

    def __repr__(self) -> str:
        return (
            f"Conv2d({self.in_channels}, {self.out_channels}, kernel_size="
            f"{self.kernel_size}, stride={self.stride}, padding={self.padding})"
        )


class Flatten(Module):
    """``(batch, d1, d2, ...)`` -> ``(batch, d1 * d2 * ...)``, for a Linear after convs."""

    def forward(self, x: Tensor) -> Tensor:
        if x.dims < 1:
            raise ShapeError(f"Flatten needs a batch dimension, got shape {x.shape}")
        # BEGIN SOLUTION 4.4
        return x.contiguous().view(x.shape[0], -1)
        # END SOLUTION


class ReLU(Module):
    """``max(x, 0)`` as a layer, for Sequential."""

    def forward(self, x: Tensor) -> Tensor:
        return x.relu()


class MaxPool2d(Module):
    """:func:`~module4.nn.maxpool2d` with a fixed kernel, as a layer."""

    def __init__(self, kernel_size: int | tuple[int, int]) -> None:
        super().__init__()
        self.kernel_size = _pair("kernel_size", kernel_size)

    def forward(self, x: Tensor) -> Tensor:
        return maxpool2d(x, self.kernel_size)

    def __repr__(self) -> str:
        return f"MaxPool2d(kernel_size={self.kernel_size})"


class AvgPool2d(MaxPool2d):
    """:func:`~module4.nn.avgpool2d` with a fixed kernel, as a layer."""

    def forward(self, x: Tensor) -> Tensor:
        return avgpool2d(x, self.kernel_size)

    def __repr__(self) -> str:
        return f"AvgPool2d(kernel_size={self.kernel_size})"


class Dropout(Module):
    """:func:`~module4.nn.dropout` in training mode, the identity after ``eval()``. The
    masks come from the layer's own generator (seeded), so a run is repeatable."""

    def __init__(self, p: float = 0.5, seed: int = 0) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout probability must be in [0, 1], got {p}")
        self.p = p
        self.rng = np.random.default_rng(seed)

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training, self.rng)

    def __repr__(self) -> str:
        return f"Dropout(p={self.p})"


class _Lookup(Function):
    """Rows of ``weight`` picked by an integer array; the backward adds each row's
    gradient back into the row it came from, repeated indices adding up: the gradient's
    rows sorted by index, each run summed by ``np.add.reduceat`` (``np.add.at`` does the
    same one entry at a time, 50x slower on a GPT's batch)."""

    @staticmethod
    def forward(ctx: Any, weight: Tensor, indices: npt.NDArray[np.int64]) -> Tensor:
        ctx.save_for_backward(weight.shape, indices)
        return from_numpy(weight.numpy()[indices], weight.backend, copy=False)

    @staticmethod
    def backward(ctx: Any, d: Tensor) -> Tensor:
        shape, indices = ctx.saved_values
        flat = indices.reshape(-1)
        order = np.argsort(flat, kind="stable")
        picked = flat[order]
        starts = np.flatnonzero(np.r_[True, picked[1:] != picked[:-1]]) if len(flat) else flat
        rows = d.numpy().reshape(-1, shape[1])[order]  # the gradient's rows, by index
        grad = np.zeros(shape, d.dtype)
        if len(flat):
            grad[picked[starts]] = np.add.reduceat(rows, starts, axis=0)
        return from_numpy(grad, d.backend, copy=False)


class Embedding(Module):
    """A table of ``num_embeddings`` vectors of size ``dim``; ``forward(indices)`` maps
    an integer array ``(batch, length)`` to ``(batch, length, dim)``.

    The table starts N(0, ``scale``²) with ``scale = 0.1`` (PyTorch draws N(0, 1)): small
    vectors keep the first layer's outputs, and the initial logits, small, and a
    Kim-style CNN on the stand-in corpus then learns in 3 epochs instead of 15.
    ``weights`` (e.g. GloVe vectors) replaces the random start; ``freeze`` keeps the
    table fixed (it is then not a Parameter, so no optimizer sees it).
    """

    def __init__(
        self,
        num_embeddings: int,
        dim: int,
        weights: Array | None = None,
        freeze: bool = False,
        rng: np.random.Generator | None = None,
        backend: TensorBackend = FastTensorBackend,
        scale: float = 0.1,
    ) -> None:
        super().__init__()
        shape = (num_embeddings, dim)
        table = weights if weights is not None else _rng(rng).normal(0, scale, shape)
        if table.shape != (num_embeddings, dim):
            raise ShapeError(
                f"Embedding({num_embeddings}, {dim}) got weights of shape {table.shape}"
            )
        value = from_numpy(np.asarray(table, dtype=np.float64), backend)
        if freeze:
            self.table = value
        else:
            self.weight = Parameter(value, "weight")
        self.num_embeddings, self.dim, self.freeze = num_embeddings, dim, freeze

    def forward(self, indices: npt.ArrayLike) -> Tensor:
        idx = np.asarray(indices)
        if idx.dtype.kind not in "iu":
            raise TypeError(f"Embedding indices must be integers, got dtype {idx.dtype}")
        if idx.size and (idx.min() < 0 or idx.max() >= self.num_embeddings):
            raise IndexError(
                f"Embedding({self.num_embeddings}, {self.dim}): index "
                f"{int(idx.max()) if idx.max() >= self.num_embeddings else int(idx.min())} "
                f"is out of range [0, {self.num_embeddings})"
            )
        table = self.table if self.freeze else self.weight.value
        return _Lookup.apply(table, idx.astype(np.int64))

    def __repr__(self) -> str:
        return f"Embedding({self.num_embeddings}, {self.dim}, freeze={self.freeze})"


class Sequential(Module):
    """Layers applied in order; they are children ``"0"``, ``"1"``... so parameters are
    named ``"0.weight"``, ``"0.bias"``..."""

    def __init__(self, *layers: Module) -> None:
        super().__init__()
        for i, layer in enumerate(layers):
            if not isinstance(layer, Module):
                raise TypeError(f"Sequential layer {i} is a {type(layer).__name__}, not a Module")
            setattr(self, str(i), layer)

    def __len__(self) -> int:
        return len(self._modules)

    def __getitem__(self, i: int) -> Module:
        return list(self._modules.values())[i]

    def forward(self, x: Any) -> Any:
        # BEGIN SOLUTION 4.4
        for layer in self._modules.values():
            x = layer(x)
        return x
        # END SOLUTION

    def summary(self, input_shape: Sequence[int], backend: TensorBackend | None = None) -> str:
        """A table of each layer's output shape and parameter count for an input of
        ``input_shape`` (a forward pass on zeros, in eval mode and without gradients),
        with the totals. A layer that rejects the shape raises its own error, which says
        which layer it was."""
        first = next(iter(self.parameters()), None)
        if backend is None:
            backend = first.value.backend if first is not None else FastTensorBackend
        dtype = first.value.dtype if first is not None else None
        x: Any = from_numpy(np.zeros(tuple(input_shape)), backend, dtype=dtype)
        rows = [("input", str(tuple(input_shape)), "")]
        was_training = self.training
        self.eval()
        try:
            with no_grad():
                for name, layer in self._modules.items():
                    try:
                        x = layer(x)
                    except Exception as error:
                        raise type(error)(
                            f"Sequential layer {name} ({layer!r}): {error}"
                        ) from error
                    rows.append((f"{name}: {layer!r}", str(x.shape), f"{layer.num_parameters():,}"))
        finally:
            self.train(was_training)
        widths = [
            max(len(r[i]) for r in [*rows, ("Layer", "Output shape", "Params")]) for i in range(3)
        ]
        line = "-" * (sum(widths) + 4)
        out = [
            f"{'Layer':<{widths[0]}}  {'Output shape':<{widths[1]}}  {'Params':>{widths[2]}}",
            line,
        ]
        out += [f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:>{widths[2]}}" for a, b, c in rows]
        out += [line, f"Total parameters: {self.num_parameters():,}"]
        return "\n".join(out)


# ## Saving and loading parameters


class StateDictError(KeyError):
    """A state dict's names do not match the model's; the message lists them."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _buffers(module: Module) -> list[tuple[str, Module, str]]:
    """Every buffer of the tree as (dotted name, the module holding it, its attribute),
    in the order of ``named_parameters``: this module's own, then each child's.

    A buffer is state a module keeps beside its parameters and no optimizer trains (a
    BatchNorm's running mean and variance, a tensor, and its batch count, an int); a
    module lists the attributes that hold its buffers in ``buffer_names``."""
    found = [(name, module, name) for name in getattr(module, "buffer_names", ())]
    for child_name, child in module._modules.items():
        found += [(f"{child_name}.{name}", owner, attr) for name, owner, attr in _buffers(child)]
    return found


def named_buffers(module: Module) -> list[tuple[str, Any]]:
    """Every buffer of the tree (see :func:`_buffers`) by dotted name, with its value."""
    return [(name, getattr(owner, attr)) for name, owner, attr in _buffers(module)]


def _buffer_array(value: Any) -> npt.NDArray[Any]:
    """A buffer as a NumPy copy: a tensor's values, or an int as a 0-d int64 array."""
    return np.array(value.to_numpy()) if isinstance(value, Tensor) else np.array(value, np.int64)


def state_dict(module: Module) -> dict[str, Array]:
    """Every parameter of ``module`` by dotted name, as a NumPy copy of its value; then
    (given code) every buffer, such as a BatchNorm's running statistics, the same way."""
    state: dict[str, Array] = {}
    # BEGIN SOLUTION 4.4
    for name, p in module.named_parameters():
        state[name] = np.array(p.value.to_numpy())
    # END SOLUTION
    for name, value in named_buffers(module):
        state[name] = _buffer_array(value)
    return state


def load_state_dict(module: Module, state: dict[str, Any]) -> None:
    """Set every parameter of ``module`` from ``state`` (dotted name -> array), each in
    the dtype the parameter has (as PyTorch's ``load_state_dict`` copies into it); then
    (given code) every buffer the same way.

    All checks come first, so a bad state dict changes nothing: missing and unexpected
    names raise StateDictError listing them; a shape that differs raises ShapeError
    naming the parameter and both shapes.
    """
    params = dict(module.named_parameters())
    buffers = {name: (owner, attr) for name, owner, attr in _buffers(module)}
    missing = sorted((set(params) | set(buffers)) - set(state))
    unexpected = sorted(set(state) - set(params) - set(buffers))
    if missing or unexpected:
        raise StateDictError(
            f"state dict does not fit {type(module).__name__}: missing {missing}, "
            f"unexpected {unexpected}"
        )
    for name, p in params.items():
        shape = tuple(np.shape(state[name]))
        if shape != p.value.shape:
            raise ShapeError(
                f"parameter {name!r}: the model has shape {p.value.shape}, the state dict {shape}"
            )
    for name, (owner, attr) in buffers.items():
        shape, want = tuple(np.shape(state[name])), _buffer_array(getattr(owner, attr)).shape
        if shape != want:
            raise ShapeError(f"buffer {name!r}: the model has shape {want}, the state dict {shape}")
    # BEGIN SOLUTION 4.4
    for name, p in params.items():
        value = np.array(state[name], dtype=p.value.dtype)
        p.update(from_numpy(value, p.value.backend))
    # END SOLUTION
    for name, (owner, attr) in buffers.items():
        old = getattr(owner, attr)
        if isinstance(old, Tensor):
            setattr(owner, attr, from_numpy(np.array(state[name], old.dtype), old.backend))
        else:
            setattr(owner, attr, int(np.asarray(state[name])))


def save(module: Module, path: str | Path) -> Path:
    """Write ``state_dict(module)`` to ``path`` (.npz), atomically: the data goes to a
    temporary file in the same folder, flushed to disk, then renamed over ``path``."""
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"save writes .npz files; got {path}")
    state = state_dict(module)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **state)  # type: ignore[arg-type]
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load(module: Module, path: str | Path) -> None:
    """Load parameters saved by :func:`save` into ``module`` (see
    :func:`load_state_dict` for the checks); a file that is not a readable .npz raises
    ValueError naming it."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            state = {name: data[name] for name in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise ValueError(f"{path} is not a readable .npz state dict: {error}") from error
    load_state_dict(module, state)

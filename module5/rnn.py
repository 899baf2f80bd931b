"""Recurrent networks: the tanh RNN, the LSTM and the GRU, as cells (one time step) and
as multi-layer sequence modules, with PyTorch's parameter names, shapes, gate order and
initialisation, so a PyTorch model's weights load one to one.

Shapes: ``N`` sequences, ``T`` time steps, ``I = input_size``, ``H = hidden_size``,
``G`` gates (1 for the RNN, 4 for the LSTM, 3 for the GRU).

* every layer ``k`` holds ``weight_ih_l{k}`` ``(G·H, I)`` (``(G·H, H)`` above the first
  layer), ``weight_hh_l{k}`` ``(G·H, H)``, ``bias_ih_l{k}`` and ``bias_hh_l{k}``
  ``(G·H,)`` (a cell's are ``weight_ih``, ... without the suffix), each drawn
  uniform(-1/sqrt(H), 1/sqrt(H));
* the gates are stacked in PyTorch's order: the LSTM's ``i, f, g, o``, the GRU's
  ``r, z, n``;
* a sequence module takes ``(T, N, I)``, or ``(N, T, I)`` with ``batch_first=True``
  (PyTorch's default and flag), and an optional initial state ``h_0`` ``(L, N, H)``
  (the LSTM's ``(h_0, c_0)``), zeros when absent; it returns ``(output, h_n)``:
  ``output`` the last layer's ``h`` at every step, ``h_n`` ``(L, N, H)`` every
  layer's last ``h`` (the LSTM's ``(h_n, c_n)``).

Backpropagation through time is the ordinary backward through the unrolled loop.
Truncated BPTT carries the final state into the next chunk of a long sequence through
:func:`detach_state`, so the gradient stops at the chunk boundary.
"""

from __future__ import annotations

import math

import numpy as np

from module0.module import Module
from module1.shape_ops import chunk, split, stack
from module1.tensor import Tensor, from_numpy
from module1.tensor_data import ShapeError
from module1.tensor_ops import TensorBackend
from module2.fast_ops import FastTensorBackend

State = tuple[Tensor, ...]
"""One layer's state: ``(h,)`` for the RNN and the GRU, ``(h, c)`` for the LSTM."""


def linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """``x @ weightᵀ + bias`` with ``weight`` stored ``(out, in)`` as PyTorch's."""
    y = x @ weight.transpose(0, 1)
    return y if bias is None else y + bias


def detach_state(state: Tensor | tuple[Tensor, ...]) -> Tensor | tuple[Tensor, ...]:
    """The state with its history cut (truncated BPTT): the same values, no graph."""
    if isinstance(state, tuple):
        return tuple(s.detach() for s in state)
    return state.detach()


# -- one time step ---------------------------------------------------------------------


def rnn_cell(
    x: Tensor,
    h: Tensor,
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor | None,
    b_hh: Tensor | None,
    nonlinearity: str = "tanh",
) -> Tensor:
    """The Elman RNN's step: ``h' = tanh(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh)`` (or relu),
    ``x`` ``(N, I)``, ``h`` ``(N, H)``."""
    pre = linear(x, w_ih, b_ih) + linear(h, w_hh, b_hh)
    return pre.tanh() if nonlinearity == "tanh" else pre.relu()


def lstm_cell(
    x: Tensor,
    state: tuple[Tensor, Tensor],
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor | None,
    b_hh: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """The LSTM's step: the four gates ``i, f, g, o`` (in that order, each ``(N, H)``)
    from ``x W_ihᵀ + b_ih + h W_hhᵀ + b_hh`` ``(N, 4H)``; ``c' = f c + i g`` and
    ``h' = o tanh(c')`` with ``i, f, o`` squashed by the sigmoid and ``g`` by tanh.
    Returns ``(h', c')``."""
    # BEGIN SOLUTION 5.6
    h, c = state
    i, f, g, o = chunk(linear(x, w_ih, b_ih) + linear(h, w_hh, b_hh), 4, 1)
    c_next = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c_next.tanh(), c_next
    # END SOLUTION


def gru_cell(
    x: Tensor,
    h: Tensor,
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor | None,
    b_hh: Tensor | None,
) -> Tensor:
    """The GRU's step, gates ``r, z, n`` in that order: ``r = σ(W_ir x + b_ir + W_hr h +
    b_hr)``, ``z`` likewise, ``n = tanh(W_in x + b_in + r (W_hn h + b_hn))`` (the reset
    gate scales the hidden side's projection, bias included) and
    ``h' = (1 - z) n + z h``."""
    # BEGIN SOLUTION 5.6
    x_r, x_z, x_n = chunk(linear(x, w_ih, b_ih), 3, 1)
    h_r, h_z, h_n = chunk(linear(h, w_hh, b_hh), 3, 1)
    r, z = (x_r + h_r).sigmoid(), (x_z + h_z).sigmoid()
    n = (x_n + r * h_n).tanh()
    return n + z * (h - n)
    # END SOLUTION


# -- parameters, shared by the cells and the sequence modules --------------------------

_GATES = {"RNN": 1, "LSTM": 4, "GRU": 3}


def _check_mode(mode: str, nonlinearity: str) -> None:
    if mode not in _GATES:
        raise ValueError(f"unknown recurrent mode {mode!r}; want one of {sorted(_GATES)}")
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")


def _sizes(name: str, **sizes: int) -> None:
    for key, value in sizes.items():
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name}: {key} must be a positive int, got {value!r}")


def _uniform(
    shape: tuple[int, ...], bound: float, rng: np.random.Generator, backend: TensorBackend
) -> Tensor:
    return from_numpy(rng.uniform(-bound, bound, shape), backend)


class _Recurrent(Module):
    """What a cell and a sequence module share: the step of their mode on one layer's
    parameters (``weight_ih{suffix}``, ...)."""

    mode: str
    nonlinearity: str
    bias: bool

    def _add_layer(
        self, suffix: str, n_in: int, hidden: int, rng: np.random.Generator,
        backend: TensorBackend,
    ) -> None:  # fmt: skip
        g, bound = _GATES[self.mode] * hidden, 1.0 / math.sqrt(hidden)
        self.add_parameter(f"weight_ih{suffix}", _uniform((g, n_in), bound, rng, backend))
        self.add_parameter(f"weight_hh{suffix}", _uniform((g, hidden), bound, rng, backend))
        if self.bias:
            self.add_parameter(f"bias_ih{suffix}", _uniform((g,), bound, rng, backend))
            self.add_parameter(f"bias_hh{suffix}", _uniform((g,), bound, rng, backend))

    def _weights(self, suffix: str) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        p = self._parameters
        w_ih, w_hh = p[f"weight_ih{suffix}"].value, p[f"weight_hh{suffix}"].value
        if not self.bias:
            return w_ih, w_hh, None, None
        return w_ih, w_hh, p[f"bias_ih{suffix}"].value, p[f"bias_hh{suffix}"].value

    def _step(self, x: Tensor, state: State, suffix: str) -> State:
        """One time step of one layer: the new state from ``x`` ``(N, in)`` and ``state``."""
        w = self._weights(suffix)
        if self.mode == "LSTM":
            h, c = state
            return lstm_cell(x, (h, c), *w)
        if self.mode == "GRU":
            return (gru_cell(x, state[0], *w),)
        return (rnn_cell(x, state[0], *w, self.nonlinearity),)

    @property
    def _n_states(self) -> int:
        return 2 if self.mode == "LSTM" else 1


def _check_dtype(name: str, x: Tensor, weight: Tensor) -> None:
    if x.dtype != weight.dtype:
        raise TypeError(f"{name}: input is {x.dtype}, the parameters {weight.dtype}; convert "
                        "one (.to(dtype) of the tensor or of the module)")  # fmt: skip


def _check_state(name: str, what: str, t: object, want: tuple[int, ...], like: Tensor) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: {what} must be a Tensor, got {type(t).__name__}")
    if t.shape != want:
        raise ShapeError(f"{name}: {what} of shape {t.shape}, want {want}")
    if t.dtype != like.dtype:
        raise TypeError(f"{name}: {what} is {t.dtype}, the input {like.dtype}")
    return t


# -- cells -----------------------------------------------------------------------------


class _Cell(_Recurrent):
    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        rng: np.random.Generator | None = None,
        backend: TensorBackend = FastTensorBackend,
    ) -> None:
        super().__init__()
        _check_mode(mode, nonlinearity)
        _sizes(f"{mode}Cell", input_size=input_size, hidden_size=hidden_size)
        self.mode, self.nonlinearity, self.bias = mode, nonlinearity, bias
        self.input_size, self.hidden_size = input_size, hidden_size
        self._add_layer("", input_size, hidden_size, rng or np.random.default_rng(0), backend)

    def _name(self) -> str:
        return f"{type(self).__name__}({self.input_size}, {self.hidden_size})"

    def _cell_step(self, x: Tensor, hx: Tensor | tuple[Tensor, ...] | None) -> State:
        if not isinstance(x, Tensor):
            raise TypeError(f"{self._name()}: input must be a Tensor, got {type(x).__name__}")
        if len(x.shape) != 2 or x.shape[1] != self.input_size:
            raise ShapeError(
                f"{self._name()}: input of shape {x.shape}, want (N, {self.input_size})"
            )
        _check_dtype(self._name(), x, self._weights("")[0])
        want = (x.shape[0], self.hidden_size)
        if hx is None:
            state = tuple(x.zeros(want) for _ in range(self._n_states))
        else:
            parts = hx if isinstance(hx, tuple) else (hx,)
            if len(parts) != self._n_states:
                raise TypeError(f"{self._name()}: want {self._n_states} state tensors, "
                                f"got {len(parts)}")  # fmt: skip
            names = ("h", "c")
            state = tuple(_check_state(self._name(), names[i], s, want, x)
                          for i, s in enumerate(parts))  # fmt: skip
        return self._step(x, state, "")

    def __repr__(self) -> str:
        return self._name()


class RNNCell(_Cell):
    """One step of an Elman RNN: ``forward(x (N, I), h (N, H) = zeros) -> h'``."""

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
        rng: np.random.Generator | None = None, backend: TensorBackend = FastTensorBackend,
    ) -> None:  # fmt: skip
        super().__init__("RNN", input_size, hidden_size, bias, nonlinearity, rng, backend)

    def forward(self, x: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._cell_step(x, hx)[0]


class LSTMCell(_Cell):
    """One LSTM step: ``forward(x (N, I), (h, c) = zeros) -> (h', c')``."""

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True,
        rng: np.random.Generator | None = None, backend: TensorBackend = FastTensorBackend,
    ) -> None:  # fmt: skip
        super().__init__("LSTM", input_size, hidden_size, bias, "tanh", rng, backend)

    def forward(self, x: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        h, c = self._cell_step(x, hx)
        return h, c


class GRUCell(_Cell):
    """One GRU step: ``forward(x (N, I), h (N, H) = zeros) -> h'``."""

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True,
        rng: np.random.Generator | None = None, backend: TensorBackend = FastTensorBackend,
    ) -> None:  # fmt: skip
        super().__init__("GRU", input_size, hidden_size, bias, "tanh", rng, backend)

    def forward(self, x: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._cell_step(x, hx)[0]


# -- sequence modules ------------------------------------------------------------------


class RNNBase(_Recurrent):
    """A stack of ``num_layers`` recurrent layers run over a whole sequence (the given
    code around :meth:`_run_layers`: checks, cutting the input into steps, the initial
    state, and stacking the results)."""

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        nonlinearity: str = "tanh",
        rng: np.random.Generator | None = None,
        backend: TensorBackend = FastTensorBackend,
    ) -> None:
        super().__init__()
        _check_mode(mode, nonlinearity)
        _sizes(mode, input_size=input_size, hidden_size=hidden_size, num_layers=num_layers)
        self.mode, self.nonlinearity, self.bias = mode, nonlinearity, bias
        self.input_size, self.hidden_size = input_size, hidden_size
        self.num_layers, self.batch_first = num_layers, batch_first
        rng = rng or np.random.default_rng(0)
        for k in range(num_layers):
            self._add_layer(f"_l{k}", input_size if k == 0 else hidden_size, hidden_size, rng,
                            backend)  # fmt: skip

    def _name(self) -> str:
        return (f"{self.mode}(input_size={self.input_size}, hidden_size={self.hidden_size}, "
                f"num_layers={self.num_layers})")  # fmt: skip

    def _run_layers(self, steps: list[Tensor], state: list[State]) -> tuple[list[Tensor],
                                                                          list[State]]:  # fmt: skip
        """The recurrence, unrolled: ``steps`` are the input's ``T`` time steps ``(N, I)``
        in order, ``state[k]`` layer ``k``'s initial state. Layer 0 runs over ``steps``,
        each layer above over the outputs (the ``h`` of every step) of the one below, each
        with ``self._step(x, s, f"_l{k}")``. Returns the last layer's ``T`` outputs and
        every layer's final state."""
        # BEGIN SOLUTION 5.6
        finals = []
        for k in range(self.num_layers):
            s = state[k]
            outputs = []
            for x in steps:
                s = self._step(x, s, f"_l{k}")
                outputs.append(s[0])
            finals.append(s)
            steps = outputs
        return steps, finals
        # END SOLUTION

    def _initial(self, hx: object, x: Tensor, n: int) -> list[State]:
        """Each layer's initial state: zeros, or ``hx`` cut along its first dimension."""
        want = (self.num_layers, n, self.hidden_size)
        if hx is None:
            zeros = x.zeros((n, self.hidden_size))
            return [tuple(zeros for _ in range(self._n_states))] * self.num_layers
        names = ("h_0", "c_0")
        parts: tuple[object, ...] = (hx,)
        if self.mode == "LSTM":
            if not isinstance(hx, tuple) or len(hx) != 2:
                raise TypeError(f"{self._name()}: the initial state is a pair (h_0, c_0)")
            parts = hx
        checked = [_check_state(self._name(), names[i], t, want, x) for i, t in enumerate(parts)]
        per_layer = [[p.view(n, self.hidden_size) for p in split(t, 1, 0)] for t in checked]
        return [tuple(layers[k] for layers in per_layer) for k in range(self.num_layers)]

    def forward(
        self, input: Tensor, hx: Tensor | tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, Tensor | tuple[Tensor, Tensor]]:
        if not isinstance(input, Tensor):
            raise TypeError(f"{self._name()}: input must be a Tensor, got {type(input).__name__}")
        layout = "(N, T, I)" if self.batch_first else "(T, N, I)"
        if len(input.shape) != 3 or input.shape[2] != self.input_size:
            raise ShapeError(f"{self._name()}: input of shape {input.shape}, want "
                             f"{layout.replace('I', str(self.input_size))}")  # fmt: skip
        _check_dtype(self._name(), input, self._weights("_l0")[0])
        time = 1 if self.batch_first else 0
        n, t = input.shape[1 - time], input.shape[time]
        if t == 0:
            raise ShapeError(f"{self._name()}: input of shape {input.shape} has no time step")
        steps = [s.view(n, self.input_size) for s in split(input, 1, time)]
        outputs, finals = self._run_layers(steps, self._initial(hx, input, n))
        output = stack(outputs, time)
        h_n = stack([s[0] for s in finals], 0)
        if self.mode == "LSTM":
            return output, (h_n, stack([s[1] for s in finals], 0))
        return output, h_n

    def __repr__(self) -> str:
        return self._name()


class RNN(RNNBase):
    """A multi-layer Elman RNN (tanh, or relu): ``forward(input, h_0) -> (output, h_n)``."""

    def __init__(
        self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
        batch_first: bool = False, nonlinearity: str = "tanh",
        rng: np.random.Generator | None = None, backend: TensorBackend = FastTensorBackend,
    ) -> None:  # fmt: skip
        super().__init__("RNN", input_size, hidden_size, num_layers, bias, batch_first,
                         nonlinearity, rng, backend)  # fmt: skip


class LSTM(RNNBase):
    """A multi-layer LSTM: ``forward(input, (h_0, c_0)) -> (output, (h_n, c_n))``."""

    def __init__(
        self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
        batch_first: bool = False, rng: np.random.Generator | None = None,
        backend: TensorBackend = FastTensorBackend,
    ) -> None:  # fmt: skip
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         "tanh", rng, backend)  # fmt: skip


class GRU(RNNBase):
    """A multi-layer GRU: ``forward(input, h_0) -> (output, h_n)``."""

    def __init__(
        self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
        batch_first: bool = False, rng: np.random.Generator | None = None,
        backend: TensorBackend = FastTensorBackend,
    ) -> None:  # fmt: skip
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         "tanh", rng, backend)  # fmt: skip

"""Stage 5's recurrent networks (``module5/rnn.py``, task 5.6): the LSTM and GRU steps
and the multi-layer sequence loop, with PyTorch's names, shapes and gate order.

Oracles: the three cells and a whole multi-layer sequence written in NumPy below, run
on the module's own weights after every parameter is drawn at random (so a wrong gate
order, a reset gate on the wrong side, or a layer fed the wrong input gives other
values); central differences of that NumPy sequence for every parameter, the input and
the initial state, through several time steps (backpropagation through time); a
Hypothesis property (a sequence run in two pieces, the state carried across, is the
sequence run at once); and truncated BPTT: with the state detached, no gradient crosses
the chunk boundary, and the second chunk's gradients are those of a sequence that
starts from a constant state.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from module1.tensor import Tensor, from_numpy
from module1.tensor_data import ShapeError
from module2.fast_ops import FastTensorBackend as FAST
from module5.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, detach_state
from tests.module5.checks import randomize

pytestmark = pytest.mark.task5_6

MODES = {"RNN": RNN, "LSTM": LSTM, "GRU": GRU}
CELLS = {"RNN": RNNCell, "LSTM": LSTMCell, "GRU": GRUCell}
TOL = {np.float64: 1e-10, np.float32: 2e-5}

# -- the oracle: recurrent networks in NumPy ---------------------------------------------


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def np_step(mode: str, x: np.ndarray, state: tuple[np.ndarray, ...],
            p: dict[str, np.ndarray], sfx: str) -> tuple[np.ndarray, ...]:  # fmt: skip
    """One step of ``mode`` on the parameters ``weight_ih{sfx}``, ... (PyTorch's layout:
    weights ``(G·H, in)``, LSTM gates ``i, f, g, o``, GRU gates ``r, z, n``)."""
    gi = x @ p["weight_ih" + sfx].T + p["bias_ih" + sfx]
    gh = state[0] @ p["weight_hh" + sfx].T + p["bias_hh" + sfx]
    if mode == "RNN":
        return (np.tanh(gi + gh),)
    if mode == "LSTM":
        i, f, g, o = np.split(gi + gh, 4, axis=1)
        c = sigmoid(f) * state[1] + sigmoid(i) * np.tanh(g)
        return sigmoid(o) * np.tanh(c), c
    (xr, xz, xn), (hr, hz, hn) = np.split(gi, 3, axis=1), np.split(gh, 3, axis=1)
    r, z = sigmoid(xr + hr), sigmoid(xz + hz)
    n = np.tanh(xn + r * hn)
    return ((1 - z) * n + z * state[0],)


Layer = tuple[np.ndarray, ...]


def np_sequence(mode: str, x: np.ndarray, state: list[Layer],
                p: dict[str, np.ndarray]) -> tuple[np.ndarray, list[Layer]]:  # fmt: skip
    """``x`` ``(T, N, I)`` through ``len(state)`` layers: the last layer's ``h`` at every
    step ``(T, N, H)`` and every layer's final state."""
    steps = list(x)
    finals = []
    for k, s in enumerate(state):
        outs = []
        for xt in steps:
            s = np_step(mode, xt, s, p, f"_l{k}")
            outs.append(s[0])
        finals.append(s)
        steps = outs
    return np.stack(steps), finals


def n_states(mode: str) -> int:
    return 2 if mode == "LSTM" else 1


def tensor(values: np.ndarray, dtype: type = np.float64, grad: bool = False) -> Tensor:
    return from_numpy(values.astype(dtype), FAST, requires_grad=grad)


def build(mode: str, sizes: tuple[int, int, int], dtype: type = np.float64, seed: int = 0,
          batch_first: bool = False) -> tuple[RNNBase, dict[str, np.ndarray]]:  # fmt: skip
    i, h, layers = sizes
    net = MODES[mode](i, h, num_layers=layers, batch_first=batch_first,
                      rng=np.random.default_rng(seed))  # fmt: skip
    net.to(dtype)
    return net, randomize(net, seed + 100)


def initial(mode: str, layers: int, n: int, h: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(layers, n, h)) for _ in range(n_states(mode))]


def hx_of(mode: str, parts: list[Tensor]) -> Tensor | tuple[Tensor, Tensor]:
    return (parts[0], parts[1]) if mode == "LSTM" else parts[0]


def finals_of(mode: str, h_n: object) -> list[np.ndarray]:
    parts = h_n if isinstance(h_n, tuple) else (h_n,)
    return [t.to_numpy() for t in parts]  # type: ignore[attr-defined]


def np_finals(finals: list[tuple[np.ndarray, ...]]) -> list[np.ndarray]:
    """Every layer's final state as PyTorch's ``(L, N, H)`` arrays (``h_n``, ``c_n``)."""
    return [np.stack([s[j] for s in finals]) for j in range(len(finals[0]))]


# -- the parameters: PyTorch's names, shapes and initialisation ---------------------------


@pytest.mark.parametrize("mode", list(MODES))
def test_parameters_and_results_have_pytorchs_names_and_shapes(mode: str) -> None:
    """``weight_ih_l{k}`` ``(G·H, in)``, ..., drawn uniform(±1/√H); ``output`` ``(T, N, H)``
    and ``h_n`` ``(L, N, H)`` (the LSTM's ``c_n`` too)."""
    net = MODES[mode](3, 5, num_layers=2)
    out, h_n = net(tensor(np.zeros((4, 2, 3))))
    assert out.shape == (4, 2, 5)
    assert [t.shape for t in (h_n if isinstance(h_n, tuple) else (h_n,))] == [(2, 2, 5)] * (
        n_states(mode)
    )
    g = {"RNN": 1, "LSTM": 4, "GRU": 3}[mode] * 5
    want = {}
    for k, n_in in ((0, 3), (1, 5)):
        want |= {f"weight_ih_l{k}": (g, n_in), f"weight_hh_l{k}": (g, 5),
                 f"bias_ih_l{k}": (g,), f"bias_hh_l{k}": (g,)}  # fmt: skip
    got = {name: p.value.shape for name, p in net.named_parameters()}
    assert list(got) == list(want) and got == want
    values = np.concatenate([p.value.to_numpy().ravel() for p in net.parameters()])
    assert np.abs(values).max() <= 1 / np.sqrt(5) and values.std() > 0.2  # uniform(±1/√H)
    cell = CELLS[mode](3, 5, bias=False)
    assert {n: p.value.shape for n, p in cell.named_parameters()} == {
        "weight_ih": (g, 3), "weight_hh": (g, 5)}  # fmt: skip


# -- one step ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_a_cell_is_the_numpy_step(mode: str, dtype: type) -> None:
    """Every parameter random (a wrong gate order gives other values), with a given
    state and with the default zeros. (The RNN's step, given code, runs in the sequence
    tests below.)"""
    cell = CELLS[mode](4, 3, rng=np.random.default_rng(1)).to(dtype)
    p = randomize(cell, 7)
    rng = np.random.default_rng(2)
    x, state = rng.normal(size=(5, 4)), [rng.normal(size=(5, 3)) for _ in range(n_states(mode))]
    hx = hx_of(mode, [tensor(s, dtype) for s in state])
    got = cell(tensor(x, dtype), hx)
    want = np_step(mode, x, tuple(state), p, "")
    zeros = np_step(mode, x, tuple(np.zeros((5, 3)) for _ in state), p, "")
    got_zero = cell(tensor(x, dtype))
    for g, w, gz, wz in zip(finals_of(mode, got), want, finals_of(mode, got_zero), zeros,
                            strict=True):  # fmt: skip
        np.testing.assert_allclose(g, w, rtol=TOL[dtype], atol=TOL[dtype],
                                   err_msg=f"{mode}Cell against the NumPy step")  # fmt: skip
        np.testing.assert_allclose(gz, wz, rtol=TOL[dtype], atol=TOL[dtype],
                                   err_msg=f"{mode}Cell from the zero state")  # fmt: skip


def test_the_gru_resets_the_hidden_sides_projection_bias_included() -> None:
    """``n = tanh(W_in x + b_in + r (W_hn h + b_hn))``: with ``h = 0`` the new gate still
    sees ``r · b_hn``, so ``b_hn`` matters; ``r`` applied to ``h`` before the product
    (the 2014 paper's variant) would drop it."""
    cell = GRUCell(2, 3, rng=np.random.default_rng(0))
    p = randomize(cell, 3)
    x = np.random.default_rng(4).normal(size=(2, 2))
    want = np_step("GRU", x, (np.zeros((2, 3)),), p, "")[0]
    np.testing.assert_allclose(cell(tensor(x)).to_numpy(), want, rtol=1e-12, atol=1e-12)
    p["bias_hh"][6:] = 0.0
    assert not np.allclose(np_step("GRU", x, (np.zeros((2, 3)),), p, "")[0], want)


# -- whole sequences ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("mode", list(MODES))
def test_a_multi_layer_sequence_is_the_numpy_sequence(mode: str, dtype: type) -> None:
    """Three layers over five steps from a given initial state: every step's output
    and every layer's final state (``h_n`` ``(L, N, H)``, the LSTM's ``c_n`` too)."""
    net, p = build(mode, (4, 3, 3), dtype, seed=1)
    rng = np.random.default_rng(5)
    x = rng.normal(size=(5, 2, 4))
    h0 = initial(mode, 3, 2, 3, seed=6)
    out, h_n = net(tensor(x, dtype), hx_of(mode, [tensor(h, dtype) for h in h0]))
    want, finals = np_sequence(mode, x, [tuple(h[k] for h in h0) for k in range(3)], p)
    assert out.shape == (5, 2, 3)
    np.testing.assert_allclose(out.to_numpy(), want, rtol=TOL[dtype], atol=TOL[dtype],
                               err_msg=f"{mode} output against NumPy")  # fmt: skip
    for got, w in zip(finals_of(mode, h_n), np_finals(finals), strict=True):
        assert got.shape == (3, 2, 3)
        np.testing.assert_allclose(got, w, rtol=TOL[dtype], atol=TOL[dtype],
                                   err_msg=f"{mode} final state against NumPy")  # fmt: skip


@pytest.mark.parametrize("mode", list(MODES))
def test_batch_first_and_the_zero_initial_state(mode: str) -> None:
    """``batch_first=True`` takes and gives ``(N, T, ·)``; no initial state is zeros."""
    net, p = build(mode, (3, 4, 2), seed=2, batch_first=True)
    x = np.random.default_rng(7).normal(size=(3, 6, 3))  # (N, T, I)
    out, h_n = net(tensor(x))
    zeros = [tuple(np.zeros((3, 4)) for _ in range(n_states(mode))) for _ in range(2)]
    want, finals = np_sequence(mode, x.transpose(1, 0, 2), zeros, p)
    assert out.shape == (3, 6, 4)
    np.testing.assert_allclose(out.to_numpy(), want.transpose(1, 0, 2), rtol=1e-10, atol=1e-12)
    for got, w in zip(finals_of(mode, h_n), np_finals(finals), strict=True):
        np.testing.assert_allclose(got, w, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", list(MODES))
def test_bptt_gradients_match_central_differences(mode: str) -> None:
    """Backpropagation through time: the gradient of a weighted sum of every output and
    the final states, through two layers and four steps, for every parameter (three
    entries each), the input and the initial state, against central differences of
    the NumPy sequence."""
    net, p = build(mode, (3, 2, 2), seed=3)
    rng = np.random.default_rng(8)
    x = rng.normal(size=(4, 2, 3))
    h0 = initial(mode, 2, 2, 2, seed=9)
    w_out = rng.normal(size=(4, 2, 2))
    w_fin = [rng.normal(size=(2, 2, 2)) for _ in h0]

    def objective(p: dict[str, np.ndarray], x: np.ndarray, h0: list[np.ndarray]) -> float:
        out, finals = np_sequence(mode, x, [tuple(h[k] for h in h0) for k in range(2)], p)
        return float((out * w_out).sum() + sum((f * w).sum()
                     for f, w in zip(np_finals(finals), w_fin, strict=True)))  # fmt: skip

    xt = tensor(x, grad=True)
    h0t = [tensor(h, grad=True) for h in h0]
    out, h_n = net(xt, hx_of(mode, h0t))
    loss = (out * tensor(w_out)).sum()
    for f, w in zip(h_n if isinstance(h_n, tuple) else (h_n,), w_fin, strict=True):
        loss = loss + (f * tensor(w)).sum()
    loss.backward()

    def slope(change: object, at: tuple[int, ...]) -> float:
        up, down = change(1e-6), change(-1e-6)  # type: ignore[operator]
        return (objective(*up) - objective(*down)) / 2e-6

    pick = np.random.default_rng(10)
    for name, param in net.named_parameters():
        grad = param.value.grad
        assert grad is not None, f"{mode}: {name} got no gradient"
        g = grad.to_numpy()
        for flat in pick.choice(g.size, min(3, g.size), replace=False):
            at = np.unravel_index(flat, g.shape)

            def moved(e: float, name: str = name, at: tuple[int, ...] = at) -> tuple:
                q = {k: v.copy() for k, v in p.items()}
                q[name][at] += e
                return q, x, h0

            assert g[at] == pytest.approx(slope(moved, at), rel=1e-5, abs=1e-8), f"{name}{at}"
    for label, leaf, arr, idx in [("input", xt, x, -1)] + [
        (f"initial state {j}", t, h, j) for j, (t, h) in enumerate(zip(h0t, h0, strict=True))
    ]:
        assert leaf.grad is not None, f"{mode}: the {label} got no gradient"
        g = leaf.grad.to_numpy()
        for flat in pick.choice(g.size, 3, replace=False):
            at = np.unravel_index(flat, g.shape)

            def moved_in(e: float, arr: np.ndarray = arr, idx: int = idx,
                         at: tuple[int, ...] = at) -> tuple:  # fmt: skip
                a = arr.copy()
                a[at] += e
                if idx < 0:
                    return p, a, h0
                return p, x, [a if j == idx else h for j, h in enumerate(h0)]

            assert g[at] == pytest.approx(slope(moved_in, at), rel=1e-5, abs=1e-8), label


@settings(max_examples=15, deadline=None)
@given(mode=st.sampled_from(list(MODES)), t=st.integers(2, 6), n=st.integers(1, 3),
       layers=st.integers(1, 3), data=st.data())  # fmt: skip
def test_two_pieces_with_the_state_carried_are_the_whole_sequence(
    mode: str, t: int, n: int, layers: int, data: st.DataObject
) -> None:
    """Running ``x[:s]`` and then ``x[s:]`` from the first piece's final state gives the
    whole run's outputs and final state: the state is all a recurrent network carries."""
    cut = data.draw(st.integers(1, t - 1), label="cut")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    net, _ = build(mode, (2, 3, layers), seed=seed % 97)
    x = np.random.default_rng(seed).normal(size=(t, n, 2))
    whole, h_whole = net(tensor(x))
    first, h_mid = net(tensor(x[:cut]))
    second, h_end = net(tensor(x[cut:]), h_mid)
    got = np.concatenate([first.to_numpy(), second.to_numpy()])
    np.testing.assert_allclose(got, whole.to_numpy(), rtol=1e-12, atol=1e-12)
    for a, b in zip(finals_of(mode, h_end), finals_of(mode, h_whole), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


# -- truncated BPTT ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_truncated_bptt_stops_the_gradient_at_the_chunk_boundary(mode: str) -> None:
    """Two chunks; the second starts from the first's final state, detached. A loss on
    the second chunk sends no gradient to the first chunk's input, and its parameter
    gradients are those of a run from a constant state with those values; without the
    detach the first chunk's input gets one."""
    net, p = build(mode, (2, 3, 2), seed=4)
    rng = np.random.default_rng(11)
    x1, x2 = rng.normal(size=(3, 2, 2)), rng.normal(size=(3, 2, 2))
    w = rng.normal(size=(3, 2, 3))
    for detach in (True, False):
        for param in net.parameters():
            param.value.grad = None
        first = tensor(x1, grad=True)
        _, state = net(first)
        carried = detach_state(state) if detach else state
        out, _ = net(tensor(x2), carried)
        (out * tensor(w)).sum().backward()
        if detach:
            assert first.grad is None or not first.grad.to_numpy().any(), (
                "a detached state must stop the gradient at the chunk boundary"
            )
            values = finals_of(mode, state)
            start = [tuple(v[k] for v in values) for k in range(2)]
            name = "weight_hh_l0"
            g = getattr(net, name).value.grad.to_numpy()
            for at in [(0, 0), (2, 1), (g.shape[0] - 1, 2)]:
                q_up = {k: v.copy() for k, v in p.items()}
                q_down = {k: v.copy() for k, v in p.items()}
                q_up[name][at] += 1e-6
                q_down[name][at] -= 1e-6
                up = (np_sequence(mode, x2, start, q_up)[0] * w).sum()
                down = (np_sequence(mode, x2, start, q_down)[0] * w).sum()
                assert g[at] == pytest.approx((up - down) / 2e-6, rel=1e-5, abs=1e-8)
        else:
            assert first.grad is not None and np.abs(first.grad.to_numpy()).max() > 1e-6


# -- clear errors ------------------------------------------------------------------------


def test_wrong_shapes_name_what_was_expected_and_what_came() -> None:
    net = LSTM(4, 3, num_layers=2, batch_first=True)
    out, (h_n, c_n) = net(tensor(np.zeros((2, 5, 4))))  # the right shapes run
    assert out.shape == (2, 5, 3) and h_n.shape == c_n.shape == (2, 2, 3)
    with pytest.raises(ShapeError, match=r"LSTM\(input_size=4.*\(2, 5, 3\).*\(N, T, 4\)"):
        net(tensor(np.zeros((2, 5, 3))))
    with pytest.raises(ShapeError, match=r"\(5, 4\).*\(N, T, 4\)"):
        net(tensor(np.zeros((5, 4))))
    with pytest.raises(ShapeError, match=r"h_0 of shape \(1, 2, 3\), want \(2, 2, 3\)"):
        z = tensor(np.zeros((1, 2, 3)))
        net(tensor(np.zeros((2, 5, 4))), (z, z))
    with pytest.raises(TypeError, match=r"pair \(h_0, c_0\)"):
        net(tensor(np.zeros((2, 5, 4))), tensor(np.zeros((2, 2, 3))))
    with pytest.raises(ShapeError, match="no time step"):
        net(tensor(np.zeros((2, 0, 4))))
    with pytest.raises(ShapeError, match=r"GRU\(input_size=2.*\(3, 1, 5\).*\(T, N, 2\)"):
        GRU(2, 3)(tensor(np.zeros((3, 1, 5))))
    with pytest.raises(ShapeError, match=r"LSTMCell\(4, 3\): input of shape \(2, 5\)"):
        LSTMCell(4, 3)(tensor(np.zeros((2, 5))))
    with pytest.raises(ShapeError, match=r"GRUCell\(4, 3\): h of shape \(2, 4\)"):
        GRUCell(4, 3)(tensor(np.zeros((2, 4))), tensor(np.zeros((2, 4))))
    with pytest.raises(
        TypeError, match=r"LSTM\(input_size=4.*input is float32, the parameters float64"
    ):
        net(tensor(np.zeros((2, 5, 4)), np.float32))
    with pytest.raises(ValueError, match="hidden_size must be a positive int"):
        RNN(3, 0)

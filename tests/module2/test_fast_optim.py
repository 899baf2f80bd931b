"""Task 2.4: the fused optimizer steps (``module2/fast_optim.py``).

* ``FastAdam`` and ``FastSGD`` (given) on the same parameters and gradients as stage 0's
  formulas written out in NumPy below (the oracle: no other task's code), step after
  step: Hypothesis draws the shapes (0-d included), the layouts of parameters and
  gradients (permuted, with gaps: a parameter that is a view gets its own storage
  first), the hyperparameters, and which parameters get no gradient on a step.
* ``adam_update`` and ``sgd_update`` called directly on NumPy arrays against the same
  formulas, on both sides of ``PARALLEL_MIN`` (the reference's plain and parallel
  loops) and at sizes no chunk divides; and, on a large parameter, in parallel
  (``tests/parallel.py``: per-thread CPU clocks, not a timing).
* The project's trainer on the fast backend, which now picks ``FastAdam``, learns the
  ``split`` dataset.

Values the optimizers produce are read with ``exact_tensor`` (``tests/strict.py``) and
must agree with NumPy's to rounding (``rtol=1e-12``).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from module0.datasets import load_dataset
from module0.module import Parameter
from module0.optim import SGD, Adam
from module0.scalar import Scalar
from module1.tensor import Tensor, from_numpy
from module1.tensor_data import TensorData
from module2.fast_ops import FastTensorBackend
from module2.fast_optim import PARALLEL_MIN, FastAdam, FastSGD, adam_update, sgd_update
from project import train
from tests.layouts import Layout, layouts, make
from tests.parallel import assert_parallel
from tests.strict import exact_tensor

Shape = tuple[int, ...]
RTOL = ATOL = 1e-12

graded = pytest.mark.task2_4

# -- strategies -------------------------------------------------------------------------

shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@st.composite
def parameter_specs(draw: st.DrawFn) -> list[tuple[Shape, Layout, Layout]]:
    """1 to 4 parameters: a shape, the parameter's layout and the gradients' layout."""
    specs = []
    for shape in draw(st.lists(shapes, min_size=1, max_size=4)):
        specs.append((shape, draw(layouts(len(shape))), draw(layouts(len(shape)))))
    return specs


def gradient(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Normal values of a random scale, with some exact zeros."""
    g = rng.normal(scale=rng.choice([1e-3, 1.0, 50.0]), size=shape)
    return np.where(rng.random(shape) < 0.1, 0.0, g)


# -- the oracle: stage 0's optimizers in NumPy ---------------------------------------------


class NumpyAdam:
    """Stage 0's Adam on NumPy arrays: per parameter a step count and two moments, made
    at its first gradient; a parameter without a gradient is skipped."""

    def __init__(self, values: list[np.ndarray], lr: float, betas: tuple[float, float],
                 eps: float) -> None:  # fmt: skip
        self.values = [v.copy() for v in values]
        self.lr, self.betas, self.eps = lr, betas, eps
        self.steps = [0] * len(values)
        self.first_moment: list[Any] = [None] * len(values)
        self.second_moment: list[Any] = [None] * len(values)

    def step(self, grads: list[np.ndarray | None]) -> None:
        beta1, beta2 = self.betas
        for i, g in enumerate(grads):
            if g is None:
                continue
            self.steps[i] += 1
            t = self.steps[i]
            m = 0.0 if self.first_moment[i] is None else self.first_moment[i]
            v = 0.0 if self.second_moment[i] is None else self.second_moment[i]
            m = beta1 * m + (1.0 - beta1) * g
            v = beta2 * v + (1.0 - beta2) * (g * g)
            self.first_moment[i], self.second_moment[i] = m, v
            m_hat, v_hat = m / (1.0 - beta1**t), v / (1.0 - beta2**t)
            self.values[i] = self.values[i] - self.lr * m_hat / (np.sqrt(v_hat) + self.eps)


class NumpySGD:
    """Stage 0's SGD on NumPy arrays: with momentum, a velocity per parameter that
    starts as its first gradient."""

    def __init__(self, values: list[np.ndarray], lr: float, momentum: float) -> None:
        self.values = [v.copy() for v in values]
        self.lr, self.momentum = lr, momentum
        self.velocity: list[Any] = [None] * len(values)

    def step(self, grads: list[np.ndarray | None]) -> None:
        for i, g in enumerate(grads):
            if g is None:
                continue
            if self.momentum:
                v = self.velocity[i]
                g = g if v is None else self.momentum * v + g
                self.velocity[i] = g
            self.values[i] = self.values[i] - self.lr * g


def run_both(
    make_oracle: Any,
    make_fast: Any,
    specs: list[tuple[Shape, Layout, Layout]],
    steps: int,
    seed: int,
) -> tuple[Any, Any]:
    """The NumPy oracle and the fused optimizer on fast-backend tensors, from the same
    values and gradients, compared after every step."""
    rng = np.random.default_rng(seed)
    values = [rng.normal(size=shape) for shape, _, _ in specs]
    params = [
        Parameter(make(x, layout, FastTensorBackend), f"p{i}")
        for i, (x, (_, layout, _)) in enumerate(zip(values, specs, strict=True))
    ]
    oracle, fast = make_oracle(values), make_fast(params)
    for step in range(steps):
        grads: list[np.ndarray | None] = []
        for (shape, _, grad_layout), p in zip(specs, params, strict=True):
            if rng.random() < 0.2:  # no gradient this step: the parameter is skipped
                p.value.grad = None
                grads.append(None)
                continue
            g = gradient(rng, shape)
            p.value.grad = make(g, grad_layout, FastTensorBackend)
            grads.append(g)
        oracle.step(grads)
        fast.step()
        for i, p in enumerate(params):
            got = exact_tensor(p.value, f"parameter {i} after step {step + 1}")
            assert got.shape == oracle.values[i].shape
            np.testing.assert_allclose(
                got, oracle.values[i], rtol=RTOL, atol=ATOL,
                err_msg=f"parameter {i} after step {step + 1}",
            )  # fmt: skip
    return oracle, fast


def check_state(name: str, got: Any, want: Any, shape: Shape) -> None:
    """A fused optimizer's per-parameter NumPy state against the oracle's (None when the
    parameter never had a gradient)."""
    if want is None:
        assert got is None or not np.any(got), name
        return
    assert type(got) is np.ndarray and got.size == int(np.prod(shape)), name
    np.testing.assert_allclose(got.reshape(shape), want, rtol=RTOL, atol=ATOL, err_msg=name)


# =========================================================================================
# The optimizers against stage 0's formulas
# =========================================================================================


@graded
@given(
    parameter_specs(),
    st.floats(1e-3, 1.0),
    st.floats(0.0, 0.99),
    st.floats(0.0, 0.9999),
    st.floats(1e-10, 1e-2),
    st.integers(1, 4),
    st.integers(0, 2**32 - 1),
)
def test_fast_adam_matches_stage0_adam(
    specs: list[tuple[Shape, Layout, Layout]],
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    steps: int,
    seed: int,
) -> None:
    betas = (beta1, beta2)
    oracle, fast = run_both(
        lambda values: NumpyAdam(values, lr, betas, eps),
        lambda ps: FastAdam(ps, lr=lr, betas=betas, eps=eps),
        specs,
        steps,
        seed,
    )
    assert isinstance(fast, FastAdam)
    assert fast.steps == oracle.steps
    for i, (shape, _, _) in enumerate(specs):
        check_state(f"m of parameter {i}", fast.first_moment[i], oracle.first_moment[i], shape)
        check_state(f"v of parameter {i}", fast.second_moment[i], oracle.second_moment[i], shape)


@graded
@given(
    parameter_specs(),
    st.floats(1e-3, 2.0),
    st.one_of(st.just(0.0), st.floats(0.0, 0.99)),
    st.integers(1, 4),
    st.integers(0, 2**32 - 1),
)
def test_fast_sgd_matches_stage0_sgd(
    specs: list[tuple[Shape, Layout, Layout]],
    lr: float,
    momentum: float,
    steps: int,
    seed: int,
) -> None:
    oracle, fast = run_both(
        lambda values: NumpySGD(values, lr, momentum),
        lambda ps: FastSGD(ps, lr=lr, momentum=momentum),
        specs,
        steps,
        seed,
    )
    assert isinstance(fast, FastSGD)
    for i, (shape, _, _) in enumerate(specs):
        check_state(f"velocity of parameter {i}", fast.velocity[i], oracle.velocity[i], shape)


@graded
def test_views_and_shared_storage_give_stage0_values() -> None:
    """A contiguous parameter is updated in its own storage; a transposed one, two
    parameters on one storage (and a third tensor on it without a gradient), and one
    tensor in two parameters end as stage 0's SGD leaves them: it gives every parameter
    a new storage per step, so each parameter moves by its own two steps (``lr * 1``,
    then ``lr * 1.5`` with momentum 0.5 and gradients of ones: 1.25 in all), the tensor
    in two parameters twice as far, and the tensor without a gradient not at all."""
    own = from_numpy(np.arange(6.0).reshape(2, 3), FastTensorBackend)
    shared = from_numpy(np.arange(4.0), FastTensorBackend)
    alias = Tensor(shared._tensor, backend=FastTensorBackend)  # the same storage
    frozen = Tensor(shared._tensor, backend=FastTensorBackend)  # the same, and no gradient
    transposed = from_numpy(np.arange(6.0).reshape(3, 2), FastTensorBackend).transpose()
    twice = from_numpy(np.arange(3.0), FastTensorBackend)
    tensors = [own, shared, alias, frozen, transposed, twice, twice]
    params = [Parameter(t) for t in tensors]
    storage = own._tensor._storage
    optimizer = FastSGD(params, lr=0.5, momentum=0.5)
    for _ in range(2):
        for p in params:
            has_grad = p.value is not frozen
            p.value.grad = (
                from_numpy(np.ones(p.value.shape), FastTensorBackend) if has_grad else None
            )
        optimizer.step()
    assert own._tensor._storage is storage  # updated in place
    expected = [
        np.arange(6.0).reshape(2, 3) - 1.25,
        np.arange(4.0) - 1.25,
        np.arange(4.0) - 1.25,
        np.arange(4.0),
        np.arange(6.0).reshape(3, 2).T - 1.25,
        np.arange(3.0) - 2.5,
        np.arange(3.0) - 2.5,
    ]
    for i, (t, want) in enumerate(zip(tensors, expected, strict=True)):
        np.testing.assert_allclose(exact_tensor(t, f"tensor {i}"), want, rtol=RTOL, atol=ATOL,
                                   err_msg=f"tensor {i}")  # fmt: skip


# =========================================================================================
# Both dtypes, and parameters replaced by views: against stage 0's optimizers
# =========================================================================================

DTYPES = [np.float64, np.float32]
DTYPE_RTOL = {np.float64: 1e-12, np.float32: 2e-6}
"""Stage 0's optimizers round after every tensor operation (in float32, to float32):
the fused step computes each entry in float64 and rounds once."""


def plain_and_fused(kind: str, params: list[Parameter]) -> Any:
    """Stage 0's optimizer ``kind`` (``"adam"``, ``"momentum"``, ``"sgd"``) on
    ``params``, or with ``fused`` its FastAdam / FastSGD, with the same arguments."""
    if kind == "adam":
        return lambda ps, fused: (FastAdam if fused else Adam)(ps, lr=0.05, betas=(0.8, 0.9))
    momentum = 0.9 if kind == "momentum" else 0.0
    return lambda ps, fused: (FastSGD if fused else SGD)(ps, lr=0.1, momentum=momentum)


def twins(values: list[np.ndarray], dtype: type) -> tuple[list[Parameter], list[Parameter]]:
    """The same values as two lists of parameters on the fast backend: stage 0's and the
    fused optimizer's."""
    make_one = lambda: [  # noqa: E731
        Parameter(from_numpy(v.astype(dtype), FastTensorBackend), f"p{i}")
        for i, v in enumerate(values)
    ]
    return make_one(), make_one()


def set_grads(rng: np.random.Generator, plain: list[Parameter], fused: list[Parameter],
              dtype: type) -> None:  # fmt: skip
    """The same random gradients on both lists; every other one stored transposed (a
    gradient need not be contiguous)."""
    for i, (p, q) in enumerate(zip(plain, fused, strict=True)):
        g = rng.normal(size=p.value.shape).astype(dtype)
        p.value.grad = from_numpy(g, FastTensorBackend)
        if i % 2 and g.ndim == 2:  # the same values, stored column by column
            q.value.grad = from_numpy(g.T.copy(), FastTensorBackend).permute(1, 0)
        else:
            q.value.grad = from_numpy(g, FastTensorBackend)


def assert_same_values(plain: list[Parameter], fused: list[Parameter], dtype: type,
                       what: str) -> None:  # fmt: skip
    for i, (p, q) in enumerate(zip(plain, fused, strict=True)):
        want = exact_tensor(p.value, f"stage 0's parameter {i}", dtype=dtype)
        got = exact_tensor(q.value, f"parameter {i} {what}", dtype=dtype)
        np.testing.assert_allclose(got, want, rtol=DTYPE_RTOL[dtype], atol=DTYPE_RTOL[dtype],
                                   err_msg=f"parameter {i} {what}")  # fmt: skip


@graded
@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
def test_every_piece_of_optimizer_state_has_the_parameters_dtype(dtype: type) -> None:
    """FastAdam's moments, FastSGD's velocities and stage 0's Adam and SGD (whose state
    is tensors), after three steps on parameters of one dtype (a 0-d one, one past the
    fused kernel's parallel cut-off, a transposed one): every state array and tensor has
    the parameters' dtype, the step counts are ints, and the values are stage 0's.
    Planted bug caught: fast_optim._state making the moments with ``np.zeros(size)``
    (float64 moments for float32 parameters, the values still right)."""
    rng = np.random.default_rng(5)
    values = [rng.normal(size=(3, 4)), rng.normal(size=()), rng.normal(size=PARALLEL_MIN + 7),
              rng.normal(size=(4, 3)).T]  # fmt: skip
    for kind in ("adam", "momentum"):
        plain, fused = twins(values, dtype)
        plain_opt = plain_and_fused(kind, plain)(plain, False)
        fused_opt = plain_and_fused(kind, fused)(fused, True)
        for step in range(3):
            set_grads(rng, plain, fused, dtype)
            plain_opt.step()
            fused_opt.step()
            assert_same_values(plain, fused, dtype, f"after {kind} step {step + 1}")
        if kind == "adam":
            assert [type(t) for t in fused_opt.steps] == [int] * 4 and fused_opt.steps == [3] * 4
            fused_states = [*fused_opt.first_moment, *fused_opt.second_moment]
            plain_states = [*plain_opt.first_moment, *plain_opt.second_moment]
        else:
            fused_states, plain_states = fused_opt.velocity, plain_opt.velocity
        for i, (state, want) in enumerate(zip(fused_states, plain_states, strict=True)):
            what = f"{kind} state {i} of {np.dtype(dtype).name} parameters"
            assert type(state) is np.ndarray, what
            assert state.dtype == dtype, f"{what} is {state.dtype}"
            want_values = exact_tensor(want, f"stage 0's {what}", dtype=dtype)
            np.testing.assert_allclose(state.reshape(want_values.shape), want_values,
                                       rtol=DTYPE_RTOL[dtype], atol=DTYPE_RTOL[dtype],
                                       err_msg=what)  # fmt: skip


def replace_by_view(step: int, params: list[Parameter]) -> None:
    """Give one parameter a new layout (values kept, or transposed for the square one),
    one kind per step; step 0 changes nothing."""
    if step == 1:  # the same storage, read transposed (a square matrix keeps its shape)
        params[0].value = params[0].value.permute(1, 0)
    elif step == 2:  # the same values, in a new storage read column by column
        values = params[1].value.to_numpy()
        column_major = from_numpy(values.T.copy(), FastTensorBackend).permute(1, 0)
        params[1].value.data = column_major.detach()
    elif step == 3:  # a strided view with gaps into a larger storage
        values = params[2].value.to_numpy()
        wide = np.full((values.shape[0], 2 * values.shape[1] + 1), np.nan, values.dtype)
        wide[:, 1::2] = values
        view = TensorData(wide.reshape(-1)[1:], values.shape, (wide.shape[1], 2))
        params[2].update(Tensor(view, backend=FastTensorBackend))
        np.testing.assert_array_equal(params[2].value.to_numpy(), values)


@graded
@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("kind", ["adam", "momentum", "sgd"])
def test_a_parameter_replaced_by_a_view_steps_as_stage_0(kind: str, dtype: type) -> None:
    """Steps of the fused optimizer and stage 0's on twin parameters, one of which gets a
    new layout before each later step (``p.value = p.value.permute(1, 0)`` on the same
    storage, ``p.value.data = `` a column-major copy, ``p.update(`` a strided view with
    gaps ``)``), with gradients stored transposed too: after every step the same values
    (the fused step may copy the view first; stage 0's makes a new tensor anyway).
    Planted bug caught: fast_optim._prepare trusting its cached check when only the
    storage was the same object, which updated a transposed view's storage in storage
    order with the gradient in index order."""
    rng = np.random.default_rng(9)
    values = [rng.normal(size=(4, 4)), rng.normal(size=(3, 5)), rng.normal(size=(2, 6))]
    plain, fused = twins(values, dtype)
    plain_opt = plain_and_fused(kind, plain)(plain, False)
    fused_opt = plain_and_fused(kind, fused)(fused, True)
    for step in range(5):
        replace_by_view(step, plain)
        replace_by_view(step, fused)
        set_grads(rng, plain, fused, dtype)
        plain_opt.step()
        fused_opt.step()
        assert_same_values(plain, fused, dtype, f"after {kind} step {step + 1}")


# =========================================================================================
# The kernels against NumPy, on both sides of PARALLEL_MIN
# =========================================================================================

SIZES = [1, 7, PARALLEL_MIN - 1, PARALLEL_MIN, 3 * PARALLEL_MIN + 5, 40_961]


@graded
@pytest.mark.parametrize("n", SIZES)
def test_adam_update_matches_numpy(n: int) -> None:
    rng = np.random.default_rng(n)
    lr, beta1, beta2, eps = 0.05, 0.8, 0.95, 1e-7
    param = rng.normal(size=n)
    m, v = np.zeros(n), np.zeros(n)
    want_p, want_m, want_v = param.copy(), m.copy(), v.copy()
    for t in range(1, 5):
        g = gradient(rng, (n,))
        adam_update(param, g, m, v, lr, beta1, beta2, eps, t)
        want_m = beta1 * want_m + (1.0 - beta1) * g
        want_v = beta2 * want_v + (1.0 - beta2) * g * g
        m_hat = want_m / (1.0 - beta1**t)
        v_hat = want_v / (1.0 - beta2**t)
        want_p = want_p - lr * m_hat / (np.sqrt(v_hat) + eps)
        for name, got, want in (("m", m, want_m), ("v", v, want_v), ("param", param, want_p)):
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"{name}, t={t}")


@graded
@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("n", SIZES)
def test_sgd_update_matches_numpy(n: int, momentum: float) -> None:
    rng = np.random.default_rng(n)
    lr = 0.3
    param = rng.normal(size=n)
    velocity = np.full(n, np.nan)  # the first step must not read it
    want_p, want_velocity = param.copy(), None
    for step in range(4):
        g = gradient(rng, (n,))
        sgd_update(param, g, velocity, lr, momentum, step > 0)
        if momentum:
            want_velocity = g if want_velocity is None else momentum * want_velocity + g
            want_p = want_p - lr * want_velocity
            np.testing.assert_allclose(velocity, want_velocity, rtol=RTOL, atol=ATOL)
        else:
            want_p = want_p - lr * g
            assert np.isnan(velocity).all()  # untouched without momentum
        np.testing.assert_allclose(param, want_p, rtol=RTOL, atol=ATOL, err_msg=f"step {step}")


@graded
def test_adam_update_runs_in_parallel() -> None:
    n = 1_000_003
    rng = np.random.default_rng(1)
    param, g = rng.normal(size=n), rng.normal(size=n)
    m, v = np.zeros(n), np.zeros(n)
    assert_parallel(
        lambda: adam_update(param, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 1), "adam_update", adam_update
    )
    assert np.all(v > 0.0)  # every entry was updated


@graded
def test_sgd_update_runs_in_parallel() -> None:
    n = 1_000_003
    rng = np.random.default_rng(2)
    param, g, velocity = rng.normal(size=n), rng.normal(size=n), np.zeros(n)
    start = param.copy()
    assert_parallel(
        lambda: sgd_update(param, g, velocity, 1e-3, 0.9, True), "sgd_update", sgd_update
    )
    assert np.all(param != start)  # every entry moved


# =========================================================================================
# Training on the fast backend
# =========================================================================================


@graded
def test_the_trainer_learns_split_on_the_fast_backend_with_fast_adam() -> None:
    config = train.Config(dataset="split", points=20, hidden=8, epochs=50)
    assert config.backend == "fast"
    data = load_dataset(config.dataset, config.points, config.seed)
    trainer = train.TensorTrainer(config, data, FastTensorBackend)
    optimizer = train.make_optimizer(config, trainer.model)
    assert type(optimizer) is FastAdam
    labels = np.array(data.y) == 1

    def accuracy() -> float:
        # From the model's outputs read back exactly, not from what the epoch reported.
        return float(np.mean((exact_tensor(trainer.model(trainer.X))[:, 0] > 0.0) == labels))

    assert accuracy() < 1.0  # so the optimizer has something to do
    for _ in range(config.epochs):
        trainer.epoch(optimizer)
    assert accuracy() == 1.0


@graded
def test_the_training_script_defaults_to_the_fast_backend(tmp_path: Path) -> None:
    code = train.main(
        ["--dataset", "split", "--points", "20", "--hidden", "8", "--epochs", "50",
         "--optimizer", "sgd", "--lr", "0.5", "--out", str(tmp_path), "--no-figure"]
    )  # fmt: skip
    assert code == 0
    with open(tmp_path / "fast_split" / "log.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 50
    assert float(rows[-1]["loss"]) < 0.5 * float(rows[0]["loss"])


# =========================================================================================
# Provided (ungraded): the given code's checks
# =========================================================================================


def test_fused_optimizers_refuse_scalars_and_mismatched_state() -> None:
    with pytest.raises(TypeError, match=r"parameter 0 'w' holds a Scalar"):
        FastAdam([Parameter(Scalar(1.0), "w")])
    with pytest.raises(TypeError, match="Scalar"):
        FastSGD([Parameter(Scalar(1.0))])
    with pytest.raises(ValueError, match="same length"):
        adam_update(np.zeros(3), np.zeros(2), np.zeros(3), np.zeros(3), 0.1, 0.9, 0.99, 1e-8, 1)
    with pytest.raises(ValueError, match="same length"):
        sgd_update(np.zeros(3), np.zeros(3), np.zeros(2), 0.1, 0.9, True)

"""Task 3.4: the fused optimizer kernels on the GPU (``module3/cuda_optim.py``).

* ``CudaAdam`` and ``CudaSGD`` against the same updates written here in NumPy
  (:class:`NumpyOptimizer`, which follows stage 0's ``Adam`` and ``SGD`` rule for rule
  without running them: no expected value comes from another task's code) on the same
  parameters and gradients, step after step: Hypothesis draws the shapes (0-d
  included), the layouts of parameters and gradients (permuted, with gaps), whether
  each starts on the host or on the device, the hyperparameters, momentum or none, and
  which parameters get no gradient on a step.
* ``adam_kernel`` and ``sgd_kernel`` launched directly on device arrays against the
  formulas in NumPy, with more threads than entries.
* The project's trainer on the CUDA backend, which picks ``CudaAdam``, learns: its loss
  goes down and the first layer's weights move (three epochs of a 2-3-3-1 network on 8
  points: about 10 seconds on the simulator, where every CUDA thread is a Python thread).

New device arrays are nan-filled (``tests/module3/device.py``), so a forward pass whose
kernels write nothing cannot pass for one that computes. Values are read back with
``exact_tensor`` (``tests/strict.py``), which copies a device storage with Numba's own
method. Values agree to rounding (``rtol=1e-12``).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numba import cuda

from module0.module import Parameter
from module0.optim import Optimizer
from module1.tensor import Tensor, from_numpy
from module1.tensor_data import TensorData
from module1.tensor_ops import TensorBackend
from module3.cuda_ops import CudaTensorBackend
from module3.cuda_optim import CudaAdam, CudaSGD, adam_kernel, sgd_kernel
from project import train
from tests.layouts import Layout, layouts, strided
from tests.module3.device import examples, host, uninitialised_memory_is_nan
from tests.strict import exact_list, exact_tensor

Shape = tuple[int, ...]
RTOL = ATOL = 1e-12

__all__ = ["uninitialised_memory_is_nan"]  # an autouse fixture: every test here uses it

graded = pytest.mark.task3_4
FEW = examples(10)

# -- strategies and helpers ---------------------------------------------------------------

shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@st.composite
def parameter_specs(draw: st.DrawFn) -> list[tuple[Shape, Layout, Layout, bool]]:
    """1 to 3 parameters: a shape, the parameter's and the gradients' layout, and
    whether the CUDA parameter's storage starts on the device."""
    specs = []
    for shape in draw(st.lists(shapes, min_size=1, max_size=3)):
        n = len(shape)
        specs.append((shape, draw(layouts(n)), draw(layouts(n)), draw(st.booleans())))
    return specs


def make(values: np.ndarray, layout: Layout, backend: TensorBackend, on_device: bool) -> Tensor:
    storage, strides = strided(values, layout)
    if on_device:
        storage = cuda.to_device(storage)
    return Tensor(TensorData(storage, values.shape, strides), backend=backend)


def gradient(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Normal values of a random scale, with some exact zeros."""
    g = rng.normal(scale=rng.choice([1e-3, 1.0, 50.0]), size=shape)
    return np.where(rng.random(shape) < 0.1, 0.0, g)


class NumpyOptimizer:
    """Stage 0's ``Adam`` (``betas`` given) or ``SGD`` (``momentum``), in NumPy, with
    its state per parameter: a parameter without a gradient is skipped, and Adam counts
    its steps per parameter."""

    def __init__(
        self,
        n: int,
        lr: float,
        betas: tuple[float, float] | None = None,
        eps: float = 1e-8,
        momentum: float = 0.0,
    ) -> None:
        self.lr, self.betas, self.eps, self.momentum = lr, betas, eps, momentum
        self.steps = [0] * n
        self.first_moment: list[np.ndarray | None] = [None] * n
        self.second_moment: list[np.ndarray | None] = [None] * n
        self.velocity: list[np.ndarray | None] = [None] * n

    def update(self, i: int, p: np.ndarray, g: np.ndarray | None) -> np.ndarray:
        """Parameter ``i``'s new value after one step from ``p`` with gradient ``g``."""
        if g is None:
            return p
        if self.betas is None:
            if self.momentum:
                v = self.velocity[i]
                g = g if v is None else self.momentum * v + g
                self.velocity[i] = g
            return p - self.lr * g
        beta1, beta2 = self.betas
        self.steps[i] += 1
        t = self.steps[i]
        m_before, v_before = self.first_moment[i], self.second_moment[i]
        m = (1.0 - beta1) * g + (0.0 if m_before is None else beta1 * m_before)
        v = (1.0 - beta2) * g * g + (0.0 if v_before is None else beta2 * v_before)
        self.first_moment[i], self.second_moment[i] = m, v
        return p - self.lr * (m / (1.0 - beta1**t)) / (np.sqrt(v / (1.0 - beta2**t)) + self.eps)


def run_both(
    reference: NumpyOptimizer,
    make_cuda: Any,
    specs: list[tuple[Shape, Layout, Layout, bool]],
    steps: int,
    seed: int,
) -> Optimizer:
    """The fused optimizer on CUDA-backend tensors and the NumPy one on arrays, from the
    same values and gradients, compared after every step; returns the fused one."""
    rng = np.random.default_rng(seed)
    values = [rng.normal(size=shape) for shape, _, _, _ in specs]
    gpu_params = [
        Parameter(make(x, layout, CudaTensorBackend, on_device), f"p{i}")
        for i, (x, (_, layout, _, on_device)) in enumerate(zip(values, specs, strict=True))
    ]
    fused = make_cuda(gpu_params)
    for step in range(steps):
        for i, ((shape, _, grad_layout, on_device), b) in enumerate(
            zip(specs, gpu_params, strict=True)
        ):
            if rng.random() < 0.2:  # no gradient this step: the parameter is skipped
                b.value.grad = None
                values[i] = reference.update(i, values[i], None)
                continue
            g = gradient(rng, shape)
            b.value.grad = make(g, grad_layout, CudaTensorBackend, not on_device)
            values[i] = reference.update(i, values[i], g)
        fused.step()
        for i, (want, b) in enumerate(zip(values, gpu_params, strict=True)):
            got = exact_tensor(b.value, f"parameter {i} after step {step + 1}")
            assert got.shape == want.shape
            np.testing.assert_allclose(
                got, want, rtol=RTOL, atol=ATOL, err_msg=f"parameter {i} after step {step + 1}"
            )
    return fused


def check_state(name: str, got: Any, want: np.ndarray | None, shape: Shape) -> None:
    """A fused optimizer's per-parameter device state against the NumPy optimizer's (None
    when the parameter never had a gradient, or SGD has no momentum)."""
    if want is None:
        assert got is None, name
        return
    size = int(np.prod(shape))
    np.testing.assert_allclose(
        host(got, size).reshape(shape), want, rtol=RTOL, atol=ATOL, err_msg=name
    )


# =========================================================================================
# The optimizers against NumPy
# =========================================================================================


@graded
@FEW
@given(
    parameter_specs(),
    st.floats(1e-3, 1.0),
    st.floats(0.0, 0.99),
    st.floats(0.0, 0.9999),
    st.floats(1e-10, 1e-2),
    st.integers(1, 3),
    st.integers(0, 2**32 - 1),
)
def test_cuda_adam_matches_numpy_adam(
    specs: list[tuple[Shape, Layout, Layout, bool]],
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    steps: int,
    seed: int,
) -> None:
    betas = (beta1, beta2)
    reference = NumpyOptimizer(len(specs), lr, betas=betas, eps=eps)
    fused = run_both(
        reference, lambda ps: CudaAdam(ps, lr=lr, betas=betas, eps=eps), specs, steps, seed
    )
    assert isinstance(fused, CudaAdam)
    assert fused.steps == reference.steps
    for i, (shape, _, _, _) in enumerate(specs):
        check_state(f"m of parameter {i}", fused.first_moment[i], reference.first_moment[i], shape)
        check_state(
            f"v of parameter {i}", fused.second_moment[i], reference.second_moment[i], shape
        )


@graded
@FEW
@given(
    parameter_specs(),
    st.floats(1e-3, 2.0),
    st.one_of(st.just(0.0), st.floats(0.0, 0.99)),
    st.integers(1, 3),
    st.integers(0, 2**32 - 1),
)
def test_cuda_sgd_matches_numpy_sgd(
    specs: list[tuple[Shape, Layout, Layout, bool]],
    lr: float,
    momentum: float,
    steps: int,
    seed: int,
) -> None:
    reference = NumpyOptimizer(len(specs), lr, momentum=momentum)
    fused = run_both(
        reference, lambda ps: CudaSGD(ps, lr=lr, momentum=momentum), specs, steps, seed
    )
    assert isinstance(fused, CudaSGD)
    for i, (shape, _, _, _) in enumerate(specs):
        check_state(f"velocity of parameter {i}", fused.velocity[i], reference.velocity[i], shape)


OPTIMIZERS = [
    pytest.param(lambda n: NumpyOptimizer(n, 0.5), lambda ps: CudaSGD(ps, lr=0.5), id="sgd"),
    pytest.param(lambda n: NumpyOptimizer(n, 0.5, momentum=0.5),
                 lambda ps: CudaSGD(ps, lr=0.5, momentum=0.5), id="sgd-momentum"),
    pytest.param(lambda n: NumpyOptimizer(n, 0.5, betas=(0.9, 0.999)),
                 lambda ps: CudaAdam(ps, lr=0.5), id="adam"),
]  # fmt: skip


@graded
@pytest.mark.parametrize(("make_reference", "make_cuda"), OPTIMIZERS)
def test_views_and_shared_storage_end_as_stage0_leaves_them(
    make_reference: Any, make_cuda: Any
) -> None:
    """A contiguous parameter on the device is updated in its own storage; one on the
    host moves to the device; a transposed one, two parameters on one device storage
    (and a third, without a gradient), and one tensor in two parameters end as stage
    0's optimizers leave them: they give every parameter a new storage per step, so
    tensors that shared a storage are updated independently, and a tensor held by two
    parameters is updated twice (with the gradient set last). The NumPy reference
    models exactly that."""

    def new(values: np.ndarray) -> Tensor:
        t = from_numpy(values, CudaTensorBackend)
        strides = tuple(s // 8 for s in values.strides)  # row-major, as NumPy gives it
        t._tensor = TensorData(cuda.to_device(values.reshape(-1)), values.shape, strides)
        return t

    own = new(np.arange(6.0).reshape(2, 3))
    on_host = from_numpy(np.arange(5.0) - 2.0, CudaTensorBackend)
    shared = new(np.arange(4.0))
    alias = Tensor(shared._tensor, backend=CudaTensorBackend)  # the same storage
    frozen = Tensor(shared._tensor, backend=CudaTensorBackend)  # the same, and no gradient
    transposed = new(np.arange(6.0).reshape(3, 2)).transpose()
    twice = new(np.arange(3.0))
    tensors = [own, on_host, shared, alias, frozen, transposed, twice, twice]
    params = [Parameter(t) for t in tensors]
    storage = own._tensor._storage
    optimizer = make_cuda(params)

    # The reference: one array per distinct tensor; parameters 6 and 7 share one.
    arrays = [
        np.arange(6.0).reshape(2, 3), np.arange(5.0) - 2.0, np.arange(4.0), np.arange(4.0),
        np.arange(4.0), np.arange(6.0).reshape(3, 2).T, np.arange(3.0),
    ]  # fmt: skip
    holds = [0, 1, 2, 3, 4, 5, 6, 6]
    reference = make_reference(len(params))
    for step in range(2):
        grads: dict[int, np.ndarray | None] = {}
        for i, p in enumerate(params):
            g = None if i == 4 else np.full(p.value.shape, 1.0 + step) * (1.0 + i)
            p.value.grad = None if g is None else from_numpy(g, CudaTensorBackend)
            grads[holds[i]] = g  # a tensor in two parameters keeps the gradient set last
        optimizer.step()
        for i, k in enumerate(holds):
            arrays[k] = reference.update(i, arrays[k], grads[k])
    assert type(optimizer) in (CudaSGD, CudaAdam)
    assert own._tensor._storage is storage  # updated in place
    for i, t in enumerate(tensors):
        got = exact_tensor(t, f"tensor {i}")
        np.testing.assert_allclose(
            got, arrays[holds[i]], rtol=RTOL, atol=ATOL, err_msg=f"tensor {i}"
        )
    np.testing.assert_array_equal(exact_tensor(frozen, "frozen"), np.arange(4.0))


# =========================================================================================
# The kernels against NumPy
# =========================================================================================

SIZES = [1, 7, 33]
THREADS = 16


def launch(size: int) -> tuple[int, int]:
    """Blocks of ``THREADS`` threads covering ``size`` entries, and a spare block."""
    return -(-size // THREADS) + 1, THREADS


@graded
@pytest.mark.parametrize("n", SIZES)
def test_adam_kernel_matches_numpy(n: int) -> None:
    rng = np.random.default_rng(n)
    lr, beta1, beta2, eps = 0.05, 0.8, 0.95, 1e-7
    want_p = rng.normal(size=n)
    want_m, want_v = np.zeros(n), np.zeros(n)
    param, m, v = (cuda.to_device(a) for a in (want_p, want_m, want_v))
    for t in range(1, 4):
        g = gradient(rng, (n,))
        bias1, bias2 = 1.0 - beta1**t, 1.0 - beta2**t
        adam_kernel[launch(n)](param, cuda.to_device(g), m, v, lr, beta1, beta2, eps, bias1, bias2)
        want_m = beta1 * want_m + (1.0 - beta1) * g
        want_v = beta2 * want_v + (1.0 - beta2) * g * g
        want_p = want_p - lr * (want_m / bias1) / (np.sqrt(want_v / bias2) + eps)
        for name, got, want in (("m", m, want_m), ("v", v, want_v), ("param", param, want_p)):
            np.testing.assert_allclose(
                host(got, n), want, rtol=RTOL, atol=ATOL, err_msg=f"{name}, t={t}"
            )


@graded
@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("n", SIZES)
def test_sgd_kernel_matches_numpy(n: int, momentum: float) -> None:
    rng = np.random.default_rng(n)
    lr = 0.3
    want_p = rng.normal(size=n)
    param = cuda.to_device(want_p)
    velocity = cuda.to_device(np.full(n, np.nan))  # the first step must not read it
    want_velocity = None
    for step in range(3):
        g = gradient(rng, (n,))
        sgd_kernel[launch(n)](param, cuda.to_device(g), velocity, lr, momentum, step > 0)
        if momentum:
            want_velocity = g if want_velocity is None else momentum * want_velocity + g
            want_p = want_p - lr * want_velocity
            np.testing.assert_allclose(host(velocity, n), want_velocity, rtol=RTOL, atol=ATOL)
        else:
            want_p = want_p - lr * g
            assert np.isnan(host(velocity, n)).all()  # untouched without momentum
        np.testing.assert_allclose(host(param, n), want_p, rtol=RTOL, atol=ATOL, err_msg=str(step))


# =========================================================================================
# Training on the CUDA backend
# =========================================================================================


@graded
def test_the_trainer_learns_on_the_cuda_backend_with_cuda_adam(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainers: list[Any] = []
    make_trainer = train.make_trainer

    def spy(config: train.Config, data: Any) -> Any:
        trainers.append(make_trainer(config, data))
        return trainers[-1]

    monkeypatch.setattr(train, "make_trainer", spy)
    config = train.Config(
        backend="cuda", epochs=3, hidden=3, points=8, seed=3, figure=False, out=tmp_path
    )
    before = train.TensorTrainer(config, train.load_dataset("xor", 8, 3), CudaTensorBackend)
    assert type(train.make_optimizer(config, before.model)) is CudaAdam
    first = exact_tensor(before.model.layers[0].weight.value, "initial weights")
    result = train.train(config)
    [trainer] = trainers
    assert trainer.backend is CudaTensorBackend
    moved = exact_tensor(trainer.model.layers[0].weight.value, "trained weights")
    assert moved.shape == first.shape == (2, 3)
    assert np.all(np.isfinite(moved)) and np.max(np.abs(moved - first)) > 0.05
    losses = np.array(exact_list(result.losses, what="losses"), dtype=np.float64)
    assert losses.shape == (3,) and np.all(np.isfinite(losses))
    assert losses[-1] < losses[0] - 0.005
    with open(tmp_path / "cuda_xor" / "log.csv") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["loss"]) for r in rows] == pytest.approx(list(losses), abs=1e-6)

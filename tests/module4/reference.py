"""NumPy references for stage 4's tests: written with NumPy alone, so the oracle never
runs the code under test."""

from __future__ import annotations

import numpy as np

Array = np.ndarray
Ints = tuple[int, ...]


def np_conv(x: np.ndarray, w: np.ndarray, stride: int = 1, padding: int = 0) -> np.ndarray:
    """Cross-correlation (PyTorch's conv1d / conv2d, no bias) of ``(B, C, *spatial)``
    with ``(O, C, *kernel)``, zero padding, the same stride along every dimension."""
    dims = x.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + [(padding, padding)] * dims)
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=tuple(range(2, x.ndim)))
    windows = windows[(slice(None), slice(None)) + (slice(None, None, stride),) * dims]
    if dims == 1:
        return np.einsum("bcxk,ock->box", windows, w)
    return np.einsum("bcxyhw,ochw->boxy", windows, w)


def np_maxpool(x: np.ndarray, k: int = 2) -> np.ndarray:
    """Non-overlapping ``k × k`` max pooling of ``(B, C, H, W)`` (H, W divisible by k)."""
    b, c, h, w = x.shape
    return x.reshape(b, c, h // k, k, w // k, k).max(axis=(3, 5))


def padded(x: Array, padding: Ints) -> Array:
    return np.pad(x, [(0, 0), (0, 0), *[(p, p) for p in padding]])


def ref_conv(x: Array, w: Array, stride: Ints, padding: Ints) -> Array:
    """PyTorch's conv1d / conv2d (cross-correlation, no bias) of ``(B, C, *n)`` with
    ``(O, C, *k)``."""
    dims = len(stride)
    windows = np.lib.stride_tricks.sliding_window_view(
        padded(x, padding), w.shape[2:], axis=tuple(range(2, 2 + dims))
    )
    windows = windows[(slice(None), slice(None), *[slice(None, None, s) for s in stride])]
    if dims == 1:
        return np.einsum("bcxk,ock->box", windows, w)
    return np.einsum("bcyxhk,ochk->boyx", windows, w)


def ref_grads(x: Array, w: Array, g: Array, stride: Ints, padding: Ints) -> tuple[Array, Array]:
    """The gradients of ``sum(ref_conv(x, w) * g)`` for ``x`` and ``w``: kernel offset
    ``k`` reads the slice ``k, k + s, k + 2s, ...`` of the padded input."""
    xp = padded(x, padding)
    dxp, dw = np.zeros_like(xp), np.zeros_like(w)
    out = g.shape[2:]
    at = "yx"[-len(out) :]  # the spatial indices
    for k in np.ndindex(*w.shape[2:]):
        reads = [slice(k[d], k[d] + stride[d] * (out[d] - 1) + 1, stride[d]) for d in range(len(k))]
        part = (slice(None), slice(None), *reads)
        tap = (slice(None), slice(None), *k)
        dw[tap] = np.einsum(f"bo{at},bc{at}->oc", g, xp[part])
        dxp[part] += np.einsum(f"bo{at},oc->bc{at}", g, w[tap])
    inside = [slice(p, p + n) for p, n in zip(padding, x.shape[2:], strict=True)]
    crop = (slice(None), slice(None), *inside)
    return dxp[crop], dw

"""NumPy references for stage 4's tests: written with NumPy alone, so the oracle never
runs the code under test."""

from __future__ import annotations

import numpy as np


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

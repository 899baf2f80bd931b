"""Stage 2: the fast CPU backend — stage 1's kernels compiled with Numba, in parallel.

``import module2 as mt`` gives the framework as of this stage: everything of stages 0
and 1 plus ``FastOps``, ``FastTensorBackend`` and the fused optimizers ``FastAdam`` and
``FastSGD`` (``mt.tensor(..., backend=mt.FastTensorBackend)``).
"""

from module1 import *  # noqa: F403
from module1 import __all__ as _stage1
from module2.fast_ops import FastOps, FastTensorBackend
from module2.fast_optim import FastAdam, FastSGD

__all__ = [*_stage1, "FastTensorBackend", "FastOps", "FastAdam", "FastSGD"]

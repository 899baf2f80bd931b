"""Stage 2: the fast CPU backend — stage 1's kernels compiled with Numba, in parallel.

``import module2 as mt`` gives the framework as of this stage: everything of stages 0
and 1 plus ``FastOps``, ``FastTensorBackend`` and the fused optimizers ``FastAdam`` and
``FastSGD`` (``mt.tensor(..., backend=mt.FastTensorBackend)``).
"""

from module1 import *  # noqa: F403
from module1 import __all__ as _stage1
from module2 import tuning

tuning.vectorize_straight_line_code()  # before any kernel compiles: see module2/tuning.py
tuning.optimise_at_level_2()
tuning.prefer_full_width_vectors()
tuning.keep_freed_memory()

from module2.fast_ops import FastOps, FastTensorBackend  # noqa: E402
from module2.fast_optim import FastAdam, FastSGD  # noqa: E402

__all__ = [*_stage1, "FastTensorBackend", "FastOps", "FastAdam", "FastSGD"]

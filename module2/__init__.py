"""Stage 2: the fast CPU backend — stage 1's kernels compiled with Numba, in parallel.

``import module2 as mt`` gives the framework as of this stage: everything of stages 0
and 1 plus ``FastOps``, ``FastTensorBackend`` and the fused optimizers ``FastAdam`` and
``FastSGD``
(``mt.tensor(..., backend=mt.FastTensorBackend)``).
"""

from module2.codegen import prefer_wide_vectors

WIDE_VECTORS = prefer_wide_vectors()
"""Whether Numba compiles for 512-bit vectors in this process (see module2/codegen.py);
must run before anything is compiled, hence first."""

from module1 import *  # noqa: E402, F403
from module1 import __all__ as _stage1  # noqa: E402
from module2.fast_ops import FastOps, FastTensorBackend  # noqa: E402
from module2.fast_optim import FastAdam, FastSGD  # noqa: E402

__all__ = [*_stage1, "FastTensorBackend", "FastOps", "FastAdam", "FastSGD"]

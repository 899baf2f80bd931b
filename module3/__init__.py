"""Stage 3: the CUDA backend — tensor kernels for an NVIDIA GPU, written with Numba.

``import module3 as mt`` gives the framework as of this stage: everything of stages 0
to 2 plus ``CudaOps`` and ``CudaTensorBackend`` (``mt.tensor(..., backend=
mt.CudaTensorBackend)``) and the fused GPU optimizers ``CudaAdam`` and ``CudaSGD``.
Importing needs no GPU; running a kernel needs one, or Numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1`` set before Numba is imported).
"""

from module2 import *  # noqa: F403
from module2 import __all__ as _stage2
from module3.cuda_ops import CudaOps, CudaTensorBackend, CudaUnavailableError
from module3.cuda_optim import CudaAdam, CudaSGD

__all__ = [
    *_stage2,
    "CudaAdam",
    "CudaOps",
    "CudaSGD",
    "CudaTensorBackend",
    "CudaUnavailableError",
]

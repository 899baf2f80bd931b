"""Let LLVM use the full width of AVX-512 for the stage-2 kernels.

On Intel CPUs with AVX-512, LLVM's tuning for the CPU says "prefer 256-bit vectors"
(wide instructions once lowered the clock on early AVX-512 parts), so a Numba loop
over float64 is vectorized 4 lanes at a time although the machine has 8-lane
registers and FMA units. Measured on the 2-core Xeon (Emerald Rapids) this course was
built on, the matrix-multiply micro-kernel of task 2.3 ran 1.4x faster with 512-bit
vectors; NumPy's OpenBLAS uses them too.

:func:`prefer_wide_vectors` adds ``-prefer-256-bit`` to the CPU features Numba compiles
for. It is a process-wide Numba setting (``numba.config.CPU_FEATURES``, the same as the
``NUMBA_CPU_FEATURES`` environment variable), so it only takes effect before Numba's
first compilation in the process, it leaves a user's own ``NUMBA_CPU_FEATURES`` alone,
and it does nothing on CPUs without AVX-512. Numba's cache records the features, so
kernels compiled either way are cached side by side, never mixed up. To opt out, set
``MINITORCH_VECTOR_BITS=256`` before importing module2.
"""

from __future__ import annotations

import os

from numba.core import codegen, config, registry


def prefer_wide_vectors() -> bool:
    """Ask LLVM for 512-bit vectors where the CPU has them; True if the setting took."""
    user_features = config.CPU_FEATURES  # type: ignore[attr-defined]
    if os.environ.get("MINITORCH_VECTOR_BITS") == "256" or user_features is not None:
        return False
    if "_toplevel_target_context" in vars(registry.cpu_target):
        return False  # Numba has already compiled something with its own settings
    features = codegen.get_host_cpu_features()
    if "+avx512f" not in features.split(","):
        return False
    config.CPU_FEATURES = features + ",-prefer-256-bit"  # type: ignore[attr-defined]
    return True

"""Four process-wide settings the fast backend makes when it is imported.

* **LLVM at -O2** (:func:`optimise_at_level_2`): ``NUMBA_OPT=2`` unless set. Numba
  optimises at -O3 by default, and it runs the whole pipeline again over every function
  a kernel calls, at every level of calls (a ``prange`` body is one more level). A
  ``prange`` loop that calls one compiled convolution helper took 5.5 s to compile at
  -O3 and 1.4 s at -O2; the main job's cold start went from 68 to 56 s. The kernels run
  at the same speed either way (exp, relu, mul, sums, a 512 product and a convolution
  layer, float64 and float32, measured in alternating processes); at -O1 the float32
  product lost a quarter.
* **LLVM's SLP vectorizer on** (:func:`vectorize_straight_line_code`). Numba runs only
  LLVM's loop vectorizer by default, which vectorizes a loop along its own index. Task
  2.3's rank-1 micro-kernel is straight-line code inside its loop (an 8 x 16 tile of
  running sums, each updated once per step); only the SLP ("superword-level
  parallelism") vectorizer packs those sums into vector registers. Without it the
  kernel runs scalar, at a seventh of the speed. This is Numba's documented
  ``NUMBA_SLP_VECTORIZE`` setting, set in the environment unless it already is (see
  :func:`use_numba_setting`).
* **Full-width vectors on AVX-512 CPUs** (:func:`prefer_full_width_vectors`). LLVM
  compiles for Intel's AVX-512 server CPUs as if only 256-bit vectors existed (a tuning
  flag, ``prefer-256-bit``, set because early AVX-512 cores slowed their clock for wide
  vectors). Task 2.3's micro-kernel then needs 32 half-width running sums and spills
  them to the stack on every step; with 512-bit vectors it keeps 16 in registers.
  Measured on a 2-core Xeon (Emerald Rapids), ``bench_fast --only matmul``: the packed
  product went from 0.32-0.57x NumPy to 0.68-0.77x in float64 and the elementwise maps
  ran as fast or faster. This adds ``-prefer-256-bit`` to the features Numba compiles
  for (``NUMBA_CPU_FEATURES``), unless the CPU or the features are already chosen.
* **Freed memory kept in the process** (:func:`keep_freed_memory`). glibc's ``malloc``
  gives every block over 128 KiB its own ``mmap`` and returns it to the system when it
  is freed, and trims the top of the heap likewise, so a kernel that allocates 2 MiB of
  packing buffers per call pays a page fault per 4 KiB on every call: measured, 2 ms of
  a 512 x 512 product that takes 3 ms, and 8.5 ms at 1024. Raising the ``mmap``
  threshold to glibc's maximum (32 MiB) fixed those, but not larger arrays: a large
  GPT's float64 step (6 x 384, context 256, batch 16) makes about sixty arrays of 38-50
  MB, and writing a fresh 50 MB array took 7.2 ms against 1.5-2 ms for reused memory.
  So ``mallopt`` turns ``mmap`` off for ``malloc`` (every block comes from the heap) and
  trims the heap only past 2 GiB free at its top: freed memory is reused, and the
  process keeps its peak. Measured on that step (2-core AMD EPYC, alternating
  processes): 4203 and 4442 ms before, 3771 and 3543 after, the same peak resident
  memory (2.4 GB). Elsewhere (macOS, musl) this does nothing.
"""

from __future__ import annotations

import ctypes
import os

import llvmlite.binding as llvm
import numba

M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
"""glibc's ``mallopt`` parameters (``<malloc.h>``)."""


def use_numba_setting(name: str, value: str) -> None:
    """Set Numba's ``name`` environment variable to ``value`` unless it is already set,
    and have Numba re-read its configuration. Through the environment rather than
    ``numba.config``: Numba re-reads every setting from the environment whenever any
    ``NUMBA_`` variable changes (a value set only in ``numba.config`` would then be
    lost), child processes inherit it, and a user's own setting wins."""
    if name not in os.environ:
        os.environ[name] = value
        numba.core.config.reload_config()


def vectorize_straight_line_code() -> None:
    """Switch on LLVM's SLP vectorizer for every kernel Numba compiles from now on."""
    use_numba_setting("NUMBA_SLP_VECTORIZE", "1")


def optimise_at_level_2() -> None:
    """Have Numba run LLVM at -O2 for every kernel it compiles from now on."""
    use_numba_setting("NUMBA_OPT", "2")


def compile_features() -> str:
    """The CPU features Numba compiles for: ``NUMBA_CPU_FEATURES`` when it is set (an
    LLVM feature list, ``"+avx2,+fma,-avx512f,..."``), else this machine's."""
    features = getattr(numba.core.config, "CPU_FEATURES", None)
    return llvm.get_host_cpu_features().flatten() if features is None else features


def vector_bytes(features: str | None = None) -> int:
    """The widest vector register the compiled kernels may use, in bytes: 64 with
    AVX-512, 32 with AVX2 and FMA, 16 otherwise (SSE2, Arm's NEON). ``features`` is an
    LLVM feature list, :func:`compile_features` unless given."""
    flags = set((compile_features() if features is None else features).split(","))
    if "+avx512f" in flags:
        return 64
    return 32 if {"+avx2", "+fma"} <= flags else 16


def vector_registers(features: str | None = None) -> int:
    """How many vector registers the compiled kernels have: 32 with AVX-512 (and on
    64-bit Arm), 16 with AVX2 or SSE."""
    flags = set((compile_features() if features is None else features).split(","))
    return 32 if "+avx512f" in flags or "+neon" in flags else 16


def without_avx512(features: str) -> str:
    """``features`` with every AVX-512 (and AMX) extension switched off: with
    ``NUMBA_CPU_NAME=haswell``, what Numba compiles for an AVX2 machine, so an AVX-512
    machine can build and measure that code too (``bench_fast --isa avx2``)."""
    return ",".join(
        "-" + flag[1:] if flag.startswith("+") and ("avx512" in flag or "amx" in flag) else flag
        for flag in features.split(",")
    )


def avx2_environment() -> dict[str, str]:
    """The Numba settings under which an AVX-512 machine compiles what an AVX2 machine
    would (Haswell's tuning, every AVX-512 extension off), for a child process."""
    return {
        "NUMBA_CPU_NAME": "haswell",
        "NUMBA_CPU_FEATURES": without_avx512(llvm.get_host_cpu_features().flatten()),
    }


def prefer_full_width_vectors() -> None:
    """On an AVX-512 CPU, let LLVM use 512-bit vectors wherever it vectorizes (see the
    module's docstring); nothing when ``NUMBA_CPU_NAME`` or ``NUMBA_CPU_FEATURES`` is
    already set, or the CPU has no AVX-512."""
    if "NUMBA_CPU_NAME" in os.environ or "NUMBA_CPU_FEATURES" in os.environ:
        return
    if vector_bytes() == 64:
        use_numba_setting("NUMBA_CPU_FEATURES", compile_features() + ",-prefer-256-bit")


def keep_freed_memory() -> bool:
    """Keep freed memory in the process (glibc): no ``mmap`` per block, the heap
    trimmed only past 2 GiB free; False where the C library has no ``mallopt`` or
    refuses."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, 2**31 - 1))

"""Two process-wide settings the fast backend makes when it is imported.

* **LLVM's SLP vectorizer on** (:func:`vectorize_straight_line_code`). Numba runs only
  LLVM's loop vectorizer by default, which vectorizes a loop along its own index. Task
  2.3's rank-1 micro-kernel is straight-line code inside its loop (a 6 x 16 tile of
  running sums, each updated once per step); only the SLP ("superword-level
  parallelism") vectorizer packs those sums into vector registers. Without it the
  kernel runs scalar, at a seventh of the speed. ``numba.config.SLP_VECTORIZE`` is the
  documented ``NUMBA_SLP_VECTORIZE`` setting; a value set here is kept when Numba
  reloads its configuration (it re-reads only changed environment variables).
* **Freed memory kept in the process** (:func:`keep_freed_memory`). glibc's ``malloc``
  gives every block over 128 KiB its own ``mmap`` and returns it to the system when it
  is freed, and trims the top of the heap likewise, so a kernel that allocates 2 MiB of
  packing buffers per call pays a page fault per 4 KiB on every call: measured, 2 ms of
  a 512 x 512 product that takes 3 ms, and 8.5 ms at 1024. ``mallopt`` raises both
  thresholds (to glibc's maximum of 32 MiB for ``mmap``), so those blocks are reused.
  Elsewhere (macOS, musl) this does nothing.
"""

from __future__ import annotations

import ctypes

import numba

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameters (``<malloc.h>``)."""


def vectorize_straight_line_code() -> None:
    """Switch on LLVM's SLP vectorizer for every kernel Numba compiles from now on."""
    numba.config.SLP_VECTORIZE = 1  # type: ignore[attr-defined]


def keep_freed_memory() -> bool:
    """Keep freed blocks of up to 32 MiB in the process (glibc); False where the C
    library has no ``mallopt`` or refuses."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, 32 << 20)) and bool(mallopt(M_TRIM_THRESHOLD, 512 << 20))

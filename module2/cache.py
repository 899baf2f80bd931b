"""Numba's on-disk kernel cache, made aware of the files a kernel inlines.

Numba keys a cached kernel on the content of the file that defines it, and nothing
else. The kernels of ``module2/fast_ops.py`` inline stage 0's operators and stage 1's
index functions, so after an edit to ``module0/operators.py`` or
``module1/tensor_data.py`` Numba would happily load the stale compiled code. That is a
trap for a student fixing a bug in task 0.1 or 1.1.

:func:`install` puts one locator in front of Numba's own: for a function defined in a
watched file it wraps the locator Numba would have chosen (same cache folder, same file
names) and adds the content hash of every dependency to the source stamp, so a change
to any of them invalidates the cache entry. Other code is untouched.

This uses ``numba.core.caching.CacheImpl._locator_classes``, a private list (checked
with numba 0.68.1; older releases name the class ``_CacheImpl``). If a later Numba
drops it, :func:`install` returns False and the cache still works, with the
stale-dependency trap back; ``NUMBA_CACHE_DIR`` pointing at a fresh folder, or
deleting ``module2/__pycache__``, clears it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from numba.core import caching

_ROOT = Path(__file__).resolve().parents[1]

WATCHED: dict[str, tuple[Path, ...]] = {
    str(_ROOT / "module2" / "fast_ops.py"): (
        _ROOT / "module0" / "operators.py",
        _ROOT / "module1" / "tensor_data.py",
        _ROOT / "module2" / "compiled_ops.py",
        _ROOT / "module2" / "fast_paths.py",
        _ROOT / "module2" / "vector_math.py",
    ),
    str(_ROOT / "module2" / "fast_paths.py"): (
        _ROOT / "module0" / "operators.py",
        _ROOT / "module1" / "tensor_data.py",
        _ROOT / "module2" / "compiled_ops.py",
        _ROOT / "module2" / "vector_math.py",
    ),
    str(_ROOT / "module2" / "fast_index.py"): (
        _ROOT / "module1" / "tensor_data.py",
        _ROOT / "module2" / "compiled_ops.py",
    ),
    str(_ROOT / "module4" / "fast_conv.py"): (_ROOT / "module4" / "conv_paths.py",),
    str(_ROOT / "module2" / "fast_matmul.py"): (
        _ROOT / "module0" / "operators.py",
        _ROOT / "module1" / "tensor_data.py",
        _ROOT / "module2" / "compiled_ops.py",
        _ROOT / "module2" / "fast_ops.py",
        _ROOT / "module2" / "fast_paths.py",
        _ROOT / "module2" / "vector_math.py",
    ),
    str(_ROOT / "module5" / "fused.py"): (
        _ROOT / "module2" / "fast_matmul.py",  # attention's products: gemm_serial
        _ROOT / "module2" / "vector_math.py",
    ),
}
"""Kernel file -> the files whose code its kernels inline."""


def _digest(path: Path) -> bytes:
    try:
        return hashlib.sha256(path.read_bytes()).digest()
    except OSError:
        return b"missing"


class DependencyLocator(caching._CacheLocator):
    """Numba's usual locator for a watched file, with its dependencies in the stamp."""

    def __init__(self, inner: Any, dependencies: tuple[Path, ...]) -> None:
        self._inner = inner
        self._dependencies = dependencies
        # Numba's warning about a kernel it cannot cache names the locator's file
        # (without this attribute, the warning raised AttributeError instead)
        self._py_file: str = inner._py_file if hasattr(inner, "_py_file") else ""

    def ensure_cache_path(self) -> None:
        self._inner.ensure_cache_path()

    def get_cache_path(self) -> str:
        return str(self._inner.get_cache_path())

    def get_disambiguator(self) -> str:
        return str(self._inner.get_disambiguator())

    def get_source_stamp(self) -> Any:
        return (self._inner.get_source_stamp(), *(_digest(p) for p in self._dependencies))

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> DependencyLocator | None:
        dependencies = WATCHED.get(os.path.abspath(py_file))
        if dependencies is None:
            return None
        for locator_class in _locator_classes() or ():
            if locator_class is cls:
                continue
            inner = locator_class.from_function(py_func, py_file)
            if inner is not None:
                return cls(inner, dependencies)
        return None


def _locator_classes() -> list[Any] | None:
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    classes = getattr(impl, "_locator_classes", None)
    return classes if isinstance(classes, list) else None


def install() -> bool:
    """Put :class:`DependencyLocator` first in Numba's locator list (once); False if this
    Numba has no such list."""
    classes = _locator_classes()
    if classes is None:
        return False
    if DependencyLocator not in classes:
        classes.insert(0, DependencyLocator)
    return True

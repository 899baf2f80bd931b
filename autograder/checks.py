"""Graded checks: what decides a grade, outside the student's process.

A *check* is a small function of one task that calls the student's framework on inputs
it draws from a seeded generator and returns what came back, as plain data: floats,
ints, bools, strings, lists, tuples, dicts with string keys, NumPy arrays, or
``raised(...)`` for an error. Checks live beside the tests, in
``tests/moduleN/checks.py``; ``@check("0.1")`` registers one.

Grading runs every check of a task twice, with the same seed (chosen afresh for each
grade):

- **in the sandbox, on the submission** (``python -m autograder.checks``): its answers
  come back as JSON lines on a pipe, and that is all that comes back;
- **on the reference**, in a process that never imports the submission.

Then the grader (trusted, and never running student code) compares the two answers of
each check (:func:`compare`): the same structure and types, equal ints, bools, strings,
shapes and error types, floats within the check's tolerance. A check whose answer
matches earns its share of the task's points; anything else (a different value, an
error, no answer, an answer that does not parse) earns nothing. Code inside the sandbox
can lie about anything, but the only way to the reference's answers for this run's
inputs is to compute them.

A *timed* check (``@check("2.3", timed=Timed(baseline, within=1 / 2))``) grades a
speed the task promises. It runs several rounds; each round's inputs come from a seed
the grader sends only when the sandbox says it is ready, and the grader times, from
outside, how long the right answer takes to come back. The bar is a trusted baseline
(the naive loop the task must beat), timed by the reference's process on the same
round's inputs before the sandbox starts. The fastest round with the right answer must
take at most ``within`` times the fastest baseline. Code inside the sandbox cannot make
the clock run slow or answer before it knows the inputs.

Checks also say *why* points were lost: the answer's path, what the reference gave and
what the submission gave, and, where the check returned ``inputs``, the inputs of that
case.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import json
import math
import os
import random
import signal
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

CHECK_SECONDS = float(os.environ.get("MINITORCH_CHECK_SECONDS", 60.0))
"""How long one check may run inside its process before it is abandoned."""


@dataclass(frozen=True)
class Timed:
    """What makes a check timed: ``baseline(rng)`` (trusted, run by the reference's
    process only) does the same work the naive way; the check's fastest right answer
    must take at most ``within`` times the baseline's fastest round."""

    baseline: Callable[[np.random.Generator], Any]
    within: float
    rounds: int = 3
    what: str = "the baseline"
    """What the baseline is, for the report ("the naive triple loop")."""


@dataclass(frozen=True)
class Check:
    """One graded check of a task."""

    task: str
    name: str
    fn: Callable[[np.random.Generator], Any]
    rtol: float = 1e-6
    atol: float = 1e-9
    judge: Callable[[Any, Any], str | None] | None = None
    """A comparison of its own: ``judge(reference_answer, answer)`` returns ``None`` for
    a match, else the reason. For checks whose answer is random (initialisers, dropout):
    the reference's answer carries what the judge needs (inputs, parameters)."""
    timed: Timed | None = None
    signed_zeros: bool = False
    """Zeros must match in sign too (``-0.0`` is not ``0.0``), where the task's contract
    fixes it (stage 0's operators: ``neg(0.0)`` is ``-0.0``, ``relu(-0.0)`` is ``0.0``)."""

    @property
    def id(self) -> str:
        return f"{self.task}:{self.name}"


CHECKS: dict[str, list[Check]] = {}
"""Task id -> its checks, in definition order (filled by importing the check modules)."""
_registry: list[dict[str, list[Check]]] = [CHECKS]
_loading = threading.Lock()
"""Where ``@check`` registers: ``CHECKS``, or a tree's own dict while
:func:`load_checks` loads that tree's check files."""


def check(
    task: str,
    name: str | None = None,
    *,
    rtol: float = 1e-6,
    atol: float = 1e-9,
    judge: Callable[[Any, Any], str | None] | None = None,
    timed: Timed | None = None,
    signed_zeros: bool = False,
) -> Callable[[Callable[[np.random.Generator], Any]], Callable[[np.random.Generator], Any]]:
    """Register the decorated function as a check of ``task`` (named after it)."""

    def register(fn: Callable[[np.random.Generator], Any]) -> Callable[..., Any]:
        entry = Check(task, name or fn.__name__, fn, rtol, atol, judge, timed, signed_zeros)
        existing = _registry[-1].setdefault(task, [])
        if any(c.name == entry.name for c in existing):
            raise ValueError(f"two checks of task {task} are named {entry.name}")
        existing.append(entry)
        return fn

    return register


@dataclass(frozen=True)
class Raised:
    """What a check returns for an error: the exception's type name."""

    type: str


def raised(call: Callable[[], Any]) -> Any:
    """``call()``'s value, or ``Raised(type name)`` if it raised (for checks of errors)."""
    try:
        return call()
    except Exception as exc:
        return Raised(type(exc).__name__)


def check_file(root: Path, stage: int) -> Path:
    return root / "tests" / f"module{stage}" / "checks.py"


def load_checks(stages: Iterable[int], root: Path | None = None) -> dict[str, list[Check]]:
    """The checks of these stages: imported as ``tests.moduleN.checks`` into ``CHECKS``
    (inside a check run), or, with ``root``, read from that tree's files into a dict of
    their own (the grader: the trusted side never imports a framework; checks import it
    only when they run)."""
    if root is None:
        for stage in sorted(set(stages)):
            name = f"tests.module{stage}.checks"
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name != name:
                    raise
        return CHECKS
    found: dict[str, list[Check]] = {}
    with _loading:  # @check registers into _registry[-1]: one loader at a time
        _load_files(stages, root, found)
    return found


def _load_files(stages: Iterable[int], root: Path, found: dict[str, list[Check]]) -> None:
    _registry.append(found)
    try:
        for stage in sorted(set(stages)):
            path = check_file(root, stage)
            if not path.is_file():
                continue
            name = f"_minitorch_checks_{stage}_{zlib.crc32(str(path).encode())}"
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
    finally:
        _registry.pop()


# -- answers as data ----------------------------------------------------------------------


def encode(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-ready data that keeps its exact type."""
    if depth > 40:
        return {"object": "too deep"}
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"float": repr(value)}
    if kind is list:
        return [encode(v, depth + 1) for v in value]
    if kind is tuple:
        return {"tuple": [encode(v, depth + 1) for v in value]}
    if kind is dict and all(type(k) is str for k in value):
        return {"dict": {k: encode(v, depth + 1) for k, v in value.items()}}
    if kind is Raised:
        return {"raised": value.type}
    if kind is np.ndarray:
        flat = value.astype(float).ravel().tolist()
        data = [x if math.isfinite(x) else repr(x) for x in flat]
        return {"array": list(value.shape), "dtype": value.dtype.name, "data": data}
    return {"object": f"{kind.__module__}.{kind.__qualname__}"}


def _float(data: Any) -> float:
    return float(data) if type(data) in (int, float, str) else math.nan


def _as_float(data: Any) -> float | None:
    """A float answer (``{"float": "nan"}`` for a non-finite one), else None."""
    if type(data) is float:
        return data
    if isinstance(data, dict) and list(data) == ["float"]:
        try:
            return float(data["float"])
        except (TypeError, ValueError):
            return None
    return None


def _close(expected: float, actual: float, rtol: float, atol: float, signed: bool = False) -> bool:
    """Equal within the tolerance; nan only matches nan, an infinity only itself, and
    with ``signed`` a zero only a zero of the same sign."""
    if math.isnan(expected) or math.isnan(actual):
        return math.isnan(expected) and math.isnan(actual)
    if math.isinf(expected) or math.isinf(actual):
        return expected == actual
    if signed and expected == 0.0 and actual == 0.0:
        return math.copysign(1.0, expected) == math.copysign(1.0, actual)
    return abs(actual - expected) <= atol + rtol * abs(expected)


def _show(data: Any) -> str:
    """A short, safe rendering of decoded answer data."""
    if isinstance(data, dict):
        if "raised" in data:
            return f"raised {data['raised']}"
        if "object" in data:
            return f"an object of type {data['object']}"
        if "float" in data:
            return str(data["float"])
        if "array" in data:
            return f"an array of shape {tuple(data['array'])}"
        if "tuple" in data:
            return "a tuple of " + str(len(data["tuple"]))
        if "dict" in data:
            return "a dict with keys " + ", ".join(sorted(data["dict"]))[:200]
    if isinstance(data, list):
        return f"a list of {len(data)}"
    text = repr(data)
    return text if len(text) <= 120 else text[:117] + "..."


def _kind(data: Any) -> str:
    if isinstance(data, dict):
        return next(iter(data), "dict")
    return type(data).__name__


def compare(
    expected: Any, actual: Any, rtol: float, atol: float, path: str = "", signed: bool = False
) -> str | None:
    """``None`` when ``actual`` matches ``expected`` (both encoded), else where and how
    they differ (``signed``: zeros must match in sign too)."""
    where = path.lstrip(".") or "the answer"
    if (want := _as_float(expected)) is not None:  # a float, or an encoded nan / inf
        got = _as_float(actual)
        if got is None or not _close(want, got, rtol, atol, signed):
            return f"{where}: expected {want!r}, got {_show(actual)}"
        return None
    if _kind(expected) != _kind(actual):
        return f"{where}: expected {_show(expected)}, got {_show(actual)}"
    if isinstance(expected, list):
        if len(expected) != len(actual):
            return f"{where}: expected {len(expected)} items, got {len(actual)}"
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            if (problem := compare(e, a, rtol, atol, f"{path}[{i}]", signed)) is not None:
                return problem
        return None
    if not isinstance(expected, dict):
        if expected != actual or type(expected) is not type(actual):
            return f"{where}: expected {_show(expected)}, got {_show(actual)}"
        return None
    key = _kind(expected)
    e, a = expected[key], actual[key]
    if key == "dict":
        if not isinstance(a, dict) or sorted(e) != sorted(a):
            return f"{where}: expected keys {sorted(e)}, got {_show(actual)}"
        for name in e:
            problem = compare(e[name], a[name], rtol, atol, f"{path}.{name}", signed)
            if problem is not None:
                return problem
        return None
    if key == "tuple":
        return compare(e, a, rtol, atol, path, signed)
    if key == "array":
        if e != a:
            return f"{where}: expected shape {tuple(e)}, got shape {_show(a)}"
        if expected.get("dtype") != actual.get("dtype"):
            kinds = f"{expected.get('dtype')!r}, got {actual.get('dtype')!r}"
            return f"{where}: expected dtype {kinds}"
        want, got = expected.get("data", []), actual.get("data", [])
        if not isinstance(got, list) or len(got) != len(want):
            return f"{where}: the array's data is malformed"
        for i, (x, y) in enumerate(zip(want, got, strict=True)):
            if not _close(_float(x), _float(y), rtol, atol, signed):
                index = np.unravel_index(i, tuple(e)) if e else ()
                return f"{where}{list(map(int, index))}: expected {_float(x)!r}, got {_show(y)}"
        return None
    if e != a:
        return f"{where}: expected {_show(expected)}, got {_show(actual)}"
    return None


def judge_answer(entry: Check, reference: Any, answer: Any) -> str | None:
    """Compare one check's two encoded answers; the reason the answer is wrong, or None."""
    try:
        if entry.judge is not None:
            return entry.judge(decode(reference), decode(answer))
        problem = compare(
            _outputs(reference), _outputs(answer), entry.rtol, entry.atol,
            signed=entry.signed_zeros,
        )  # fmt: skip
    except Exception as exc:  # malformed data from the sandbox
        return f"the answer could not be read ({type(exc).__name__})"
    if problem is None:
        return None
    inputs = _inputs_at(reference, problem)
    return problem + (f" (inputs: {inputs})" if inputs else "")


def _outputs(data: Any) -> Any:
    """An answer without its ``inputs`` entry (which is context, not compared)."""
    if isinstance(data, dict) and "dict" in data and isinstance(data["dict"], dict):
        return {"dict": {k: v for k, v in data["dict"].items() if k != "inputs"}}
    return data


def _inputs_at(reference: Any, problem: str) -> str:
    """The reference's ``inputs[i]`` for the first list index ``i`` in ``problem``."""
    if not (isinstance(reference, dict) and isinstance(reference.get("dict"), dict)):
        return ""
    inputs = reference["dict"].get("inputs")
    if not isinstance(inputs, list) or "[" not in problem:
        return ""
    try:
        index = int(problem.split("[", 1)[1].split("]", 1)[0].split(",")[0])
        return _short(decode(inputs[index]))
    except (ValueError, IndexError):
        return ""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def decode(data: Any) -> Any:
    """Encoded answer data back into Python values (arrays as NumPy arrays)."""
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    key = _kind(data)
    if key == "dict":
        return {k: decode(v) for k, v in data["dict"].items()}
    if key == "tuple":
        return tuple(decode(v) for v in data["tuple"])
    if key == "float":
        return float(data["float"])
    if key == "array":
        values = np.array([_float(x) for x in data["data"]], dtype=float)
        return values.reshape(tuple(data["array"]))
    if key == "raised":
        return Raised(str(data["raised"]))
    return data


# -- running checks -----------------------------------------------------------------------


def seed_for(seed: int, entry: Check) -> np.random.Generator:
    """The generator a check draws from: this run's seed and the check's id."""
    return np.random.default_rng([seed, zlib.crc32(entry.id.encode())])


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def round_rng(round_seed: int, entry: Check) -> np.random.Generator:
    """The generator of one round of a timed check (never the check's own)."""
    return np.random.default_rng([round_seed, zlib.crc32(entry.id.encode()), 1])


def _answer(call: Callable[[], Any]) -> Any:
    """``encode(call())``, or the error it raised (within ``CHECK_SECONDS``). An error
    that the check did not turn into an answer (:func:`raised`), a timeout included,
    carries a message: from the reference, that is no answer but a broken grader."""
    signal.setitimer(signal.ITIMER_REAL, CHECK_SECONDS)
    try:
        return encode(call())
    except _Timeout:
        return {"raised": f"timeout after {CHECK_SECONDS:g} s",
                "message": f"the check ran for more than {CHECK_SECONDS:g} s "
                           "(MINITORCH_CHECK_SECONDS)"}  # fmt: skip
    except BaseException as exc:
        return {"raised": type(exc).__name__, "message": str(exc)[:300]}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _write(out: Any, record: dict[str, Any]) -> None:
    out.write(json.dumps(record) + "\n")
    out.flush()


def run_checks(
    task_ids: Sequence[str],
    seed: int,
    out: Any,
    rounds: Sequence[int] | None = None,
    seeds_in: Any = None,
) -> None:
    """Run the checks of these tasks, writing one JSON line per check to ``out``.

    A timed check first runs once on ``seed`` (so its kernels are compiled), then runs
    its rounds. The reference (``rounds``: the round seeds, known in advance) answers
    each round and times the baseline on it. A submission (``rounds`` None) says
    ``ready`` and reads each round's seed from ``seeds_in``: the grader's clock runs
    from the moment it sends the seed to the moment the answer arrives.
    """
    load_checks({int(t.split(".")[0]) for t in task_ids})
    signal.signal(signal.SIGALRM, _alarm)
    for task in task_ids:
        for entry in CHECKS.get(task, []):
            start = time.monotonic()
            np.random.seed(seed % 2**32)
            random.seed(seed)
            value = _answer(functools.partial(entry.fn, seed_for(seed, entry)))
            _write(out, {"check": entry.id, "answer": value,
                         "seconds": round(time.monotonic() - start, 3)})  # fmt: skip
            if entry.timed is None or (isinstance(value, dict) and "raised" in value):
                continue
            if rounds is not None:
                _reference_rounds(entry, entry.timed, rounds, out)
                continue
            for number in range(entry.timed.rounds):
                _write(out, {"check": entry.id, "ready": number})
                line = _read_seed(seeds_in)
                if not line.strip().isdigit():
                    break
                round_seed, start = int(line), time.monotonic()
                value = _answer(functools.partial(entry.fn, round_rng(round_seed, entry)))
                _write(out, {"check": entry.id, "round": number, "answer": value,
                             "seconds": round(time.monotonic() - start, 4)})  # fmt: skip


def _read_seed(seeds_in: Any) -> str:
    """The next round's seed from the grader ("" after ``CHECK_SECONDS`` without one)."""
    if seeds_in is None:
        return ""
    signal.setitimer(signal.ITIMER_REAL, CHECK_SECONDS)
    try:
        return seeds_in.readline()
    except _Timeout:
        return ""
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _reference_rounds(entry: Check, timed: Timed, rounds: Sequence[int], out: Any) -> None:
    """The reference's answer to each round, and the baseline's time on it (the fastest
    of two runs, after one run that compiles it)."""
    _answer(lambda: timed.baseline(round_rng(rounds[0], entry)))
    for number, round_seed in enumerate(rounds[: timed.rounds]):
        value = _answer(functools.partial(entry.fn, round_rng(round_seed, entry)))
        best = math.inf
        for _ in range(2):
            start = time.perf_counter()
            timed.baseline(round_rng(round_seed, entry))
            best = min(best, time.perf_counter() - start)
        _write(out, {"check": entry.id, "round": number, "answer": value, "baseline": best})


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="run graded checks, answers on a pipe")
    parser.add_argument("tasks", nargs="+")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--fd", type=int, default=int(os.environ.get("MINITORCH_DATA_FD", 3)),
                        help="write the answers here")  # fmt: skip
    parser.add_argument(
        "--rounds", default=os.environ.get("MINITORCH_ROUNDS"),
        help="the reference's run: the timed rounds' seeds (or MINITORCH_ROUNDS)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    sys.setrecursionlimit(10000)
    rounds = [int(v) for v in args.rounds.split(",")] if args.rounds else None
    with os.fdopen(args.fd, "w", encoding="utf-8") as out:
        run_checks(args.tasks, args.seed, out, rounds, sys.stdin)


if __name__ == "__main__":  # run the imported module's copy: the one checks register in
    from autograder.checks import main as _main

    _main()

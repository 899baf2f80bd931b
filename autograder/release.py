"""``minitorch release``: write the student handout from the reference, and prove it.

The handout is the reference tree with every solution region of the released stages
replaced by its stub (see :mod:`autograder.regions`); every other byte is copied as it
is, except what only makes sense for the reference, which the handout leaves out: its
own CI (``.ci/``, ``.github/workflows/ci.yml``: they run the full suite and would fail
on every student's stubs; student repositories use ``.github/workflows/classroom.yml``)
and the tests of the tooling itself (``tests/autograder/``, ``tests/test_registry.py``:
they check the reference's solution regions and would only slow and confuse students).
``--through N`` releases stages 0..N: the packages ``moduleK/`` and the test folders
``tests/moduleK/`` of later stages are left out entirely (no stubs, no tests), and the
tooling in the handout ignores the registry's tasks whose package is absent, so
``minitorch status`` shows only what was released. Release the next stages later into a
fresh folder and hand students the new packages.

Before it starts, a verified release checks that what the verification needs is here
(:func:`check_prerequisites`: pytest and Hypothesis, and every tool a released task
needs, such as stage 6's MPI) and refuses at once, naming the install command, where it
is not. Before it reports success the release verifies the handout, and fails with a
message naming the task, file and test when any check does not hold:

1. no solution marker and no region's solution text is left in the handout;
2. every region names a registry task that lists its file, and every released task has a
   region in each file it lists;
3. every released stage package imports, and the handout's tests collect;
4. every graded test (one with a task marker) fails on the handout;
5. every graded test passes on the reference *in the released shape* (a copy of the
   reference with the same files as the handout: what passes only next to later stages
   fails here);
6. every function a task lists (so every stub of the task) is called by the task's own
   tests on the reference: a stub no test reaches would prescribe code nobody checks;
7. ``minitorch grade`` gives the handout 0 on every graded check, and the reference (in
   the released shape, as the grader that ships with a ``--stage``/``--through`` bundle
   sees it) full marks.
"""

from __future__ import annotations

import ast
import os
import shutil
import site
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from autograder import sandbox
from autograder.handout import student_readme
from autograder.leftovers import remove_tree
from autograder.paths import ROOT, available_tasks, course_tasks, repo_files, test_dirs
from autograder.private import bytecode_env, checked, private_folder
from autograder.regions import BEGIN, END, RegionError, find_regions, omitted_names, stub_text
from autograder.runner import RunResult, TestResult, merge_runs, run_pytest
from autograder.task import MissingTool, Task, Tool, missing_tools

_NOT_RUN = TestResult("", "error", message="did not run")


class ReleaseError(RuntimeError):
    """The handout failed a check; the message says which task, file and test."""


@dataclass
class ReleaseReport:
    out_dir: Path
    tasks: tuple[Task, ...]
    files_copied: int = 0
    files_stubbed: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)


REFERENCE_CODE = (
    "module2/fast_paths.py", "module2/vector_math.py", "tests/module2/test_fast_paths.py",
    "tests/module2/test_gemm_tiles.py", "module5/fused_cuda.py", "tests/module5/test_fused_cuda.py",
    "module4/conv_paths.py", "module5/fast_decode.py", "tests/module5/test_fast_decode.py",
    "module4/fast_linear.py", "tests/module4/test_fast_linear.py", "module5/fast_block.py",
    "tests/module5/test_fast_block.py", "module5/fast_optim.py", "tests/module5/test_fast_optim.py",
)  # fmt: skip
"""The reference's optional fast paths (and their tests): its solutions use them, so the
reference in the released shape has them; a handout does not (a task's answer is the
student's own)."""

REFERENCE_ONLY = (
    ".ci/", ".github/workflows/ci.yml", "tests/autograder/", "tests/test_registry.py",
    *REFERENCE_CODE,
)  # fmt: skip
"""Files and folders of the reference that a handout leaves out."""


def _listed(rel: Path, listed: tuple[str, ...]) -> bool:
    path = rel.as_posix()
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in listed)


def _reference_only(rel: Path) -> bool:
    return _listed(rel, REFERENCE_ONLY)


def _later_stage(rel: Path, through: int | None) -> bool:
    if through is None:
        return False
    parts = rel.parts
    names = [parts[0]] + ([parts[1]] if len(parts) > 1 and parts[0] == "tests" else [])
    for name in names:
        if name.startswith("module") and name[6:].isdigit() and int(name[6:]) > through:
            return True
    return False


def check_regions(root: Path, tasks: Iterable[Task]) -> None:
    """Check 2 on the reference: regions and registry agree (ReleaseError if not)."""
    tasks = tuple(tasks)
    known = {t.id: t for t in course_tasks(root)}
    seen: set[tuple[str, str]] = set()
    for rel in repo_files(root):
        if rel.suffix != ".py" or rel.parts[0] == "tests":
            continue
        path = rel.as_posix()
        try:
            regions = find_regions((root / rel).read_text(encoding="utf-8"), path)
        except (RegionError, UnicodeDecodeError) as exc:
            raise ReleaseError(str(exc)) from exc
        for region in regions:
            task = known.get(region.task_id)
            if task is None:
                raise ReleaseError(
                    f"{path}:{region.begin}: region of task {region.task_id}, which is not in "
                    "autograder/registry.py"
                )
            if path not in task.files:
                raise ReleaseError(
                    f"{path}:{region.begin}: region of task {task.id}, but the registry does "
                    f"not list {path} among the task's files"
                )
            seen.add((task.id, path))
    for task in tasks:
        for path in task.files:
            if (task.id, path) not in seen:
                raise ReleaseError(f"task {task.id} lists {path} but has no region there")


def write_reference(root: Path, out_dir: Path, through: int | None = None) -> None:
    """Copy the reference in the released shape: the handout's files, solutions kept,
    with the fast paths its solutions use (and the repository's own README). Files
    already there and unchanged are kept as they are, and so are ``__pycache__``
    folders: Numba's cached kernels stay valid."""
    wanted = {rel for rel in repo_files(root) if not _later_stage(rel, through)
              and (not _reference_only(rel) or _listed(rel, REFERENCE_CODE))}  # fmt: skip
    if out_dir.exists():
        for path in sorted(out_dir.rglob("*"), reverse=True):
            rel = path.relative_to(out_dir)
            if "__pycache__" in rel.parts or path.is_dir():
                continue
            if rel not in wanted:
                path.unlink()
    for rel in sorted(wanted):
        source, target = root / rel, out_dir / rel
        info = source.stat()
        if target.exists() and (target.stat().st_mtime, target.stat().st_size) == (
            info.st_mtime,
            info.st_size,
        ):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def shaped_reference(root: Path, through: int | None) -> Path:
    """The reference in the released shape, in a folder of its own that is kept between
    releases (so Numba's kernel cache beside it stays warm): in the tooling's private
    folder (:mod:`autograder.private`), never under a name anyone could make first."""
    key = zlib.crc32(str(root.resolve()).encode())
    base = private_folder("shaped")
    _prune_shaped(base)
    name = f"{key:08x}-{'all' if through is None else through}"
    folder = checked(base / name)
    checked(_kernel_cache(folder))
    write_reference(root, folder, through)
    folder.with_name(folder.name + ".root").write_text(str(root.resolve()), encoding="utf-8")
    return folder


def _prune_shaped(base: Path) -> None:
    """Remove the shaped copies (and kernel caches) of trees that no longer exist."""
    for marker in base.glob("*.root"):
        try:
            if Path(marker.read_text(encoding="utf-8")).is_dir():
                continue
            folder = marker.with_suffix("")
            remove_tree(folder)
            remove_tree(_kernel_cache(folder))
            marker.unlink()
        except OSError:
            continue


def _kernel_cache(shaped: Path) -> Path:
    """Numba's cache for the trusted runs of a shaped reference, kept beside it."""
    return shaped.with_name(shaped.name + "-kernels")


def write_handout(root: Path, out_dir: Path, through: int | None = None) -> ReleaseReport:
    """Copy the tree with the released stages' regions stubbed (no verification)."""
    tasks = tuple(t for t in available_tasks(root) if through is None or t.stage <= through)
    stubbed_files = {path for t in tasks for path in t.files}
    report = ReleaseReport(out_dir=out_dir, tasks=tasks)
    for rel in repo_files(root):
        if _later_stage(rel, through) or _reference_only(rel):
            continue
        target = out_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        path = rel.as_posix()
        if path == "README.md":  # the handout's own front door, for students
            target.write_text(student_readme(tasks), encoding="utf-8")
        elif path in stubbed_files:
            text = (root / rel).read_bytes().decode("utf-8")
            try:
                target.write_bytes(stub_text(text, path).encode("utf-8"))
            except RegionError as exc:
                raise ReleaseError(str(exc)) from exc
            report.files_stubbed.append(path)
        else:
            shutil.copy2(root / rel, target)
        report.files_copied += 1
    return report


def _check_no_solution_left(root: Path, report: ReleaseReport) -> None:
    for rel in repo_files(report.out_dir):
        if rel.suffix != ".py":
            continue
        text = (report.out_dir / rel).read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), start=1):
            if BEGIN.match(line) or END.match(line):
                raise ReleaseError(f"handout {rel}:{number}: a solution marker is left")
    for path in report.files_stubbed:
        reference = (root / path).read_text(encoding="utf-8")
        handout = (report.out_dir / path).read_text(encoding="utf-8")
        lines = reference.splitlines(keepends=True)
        regions = find_regions(reference, path)
        outside = "".join(
            line for i, line in enumerate(lines, start=1)
            if not any(r.begin <= i <= r.end for r in regions)
        )  # fmt: skip
        for region in regions:
            body = "".join(region.body(lines))
            if body.strip() and body in handout and body not in outside:
                raise ReleaseError(
                    f"handout {path}: the solution of task {region.task_id} "
                    f"({region.function or 'line ' + str(region.begin)}) is still there"
                )
    _check_omitted_names_unused(root, report)


def _omitted_uses(
    tree: ast.Module, module: str, here: str, omitted: set[str]
) -> list[tuple[int, str]]:
    """Where the code of ``tree`` (the module ``here``) uses a name that ``module``'s
    omit regions define: a global of its own module, an import from it, or an
    attribute of it. Local variables and parameters of the same name do not count."""
    found: list[tuple[int, str]] = []
    aliases = set()  # names bound to ``module`` itself
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == module:
            found += [(node.lineno, a.name) for a in node.names if a.name in omitted]
        elif isinstance(node, ast.ImportFrom) and f"{node.module}.{node.names[0].name}" == module:
            aliases.add(node.names[0].asname or node.names[0].name)
        elif isinstance(node, ast.Import):
            aliases |= {a.asname for a in node.names if a.name == module and a.asname}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute) and node.attr in omitted
            and isinstance(node.value, ast.Name) and node.value.id in aliases
        ):  # fmt: skip
            found.append((node.lineno, node.attr))
    if here != module:
        return found

    def visit(node: ast.AST, local: set[str]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            args = node.args
            names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
            names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                      and isinstance(n.ctx, ast.Store)}  # fmt: skip
            local = local | names
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in omitted and node.id not in local:
                found.append((node.lineno, node.id))
        for child in ast.iter_child_nodes(node):
            visit(child, local)

    visit(tree, set())
    return found


def _check_omitted_names_unused(root: Path, report: ReleaseReport) -> None:
    """Given code must not use what an ``omit`` region defined: the handout lacks it."""
    by_module: dict[str, dict[str, str]] = {}
    for path in report.files_stubbed:
        text = (root / path).read_text(encoding="utf-8")
        module = path.removesuffix(".py").replace("/", ".")
        for name, region in omitted_names(text, path).items():
            by_module.setdefault(module, {})[name] = (
                f"{path}:{region.begin} (task {region.task_id})"
            )
    if not by_module:
        return
    for rel in repo_files(report.out_dir):
        if rel.suffix != ".py" or rel.parts[0] == "tests":
            continue
        source = (report.out_dir / rel).read_text(encoding="utf-8")
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            raise ReleaseError(f"handout {rel} does not parse: {exc}") from exc
        here = rel.with_suffix("").as_posix().replace("/", ".")
        for module, omitted in by_module.items():
            for line, name in _omitted_uses(tree, module, here, set(omitted)):
                raise ReleaseError(
                    f"handout {rel}:{line} uses {name}, which the reference defines in an "
                    f"omit region at {omitted[name]}: the handout does not have it"
                )


class _Progress:
    """While a long step of the verification runs, one line every ``every`` seconds:
    the step, and how far each of its parallel runs is."""

    def __init__(self, log: Callable[[str], None], step: str, every: float = 15.0) -> None:
        self.log, self.step, self.every = log, step, every
        self.start = self.last = time.monotonic()
        self.counts: dict[str, str] = {}
        self.lock = threading.Lock()

    def update(self, name: str, done: str) -> None:
        with self.lock:
            self.counts[name] = done
            now = time.monotonic()
            if now - self.last >= self.every:
                self.last = now
                parts = ", ".join(f"{n} {c}" for n, c in self.counts.items())
                self.log(f"  ... {self.step} ({now - self.start:.0f} s): {parts}")

    def tests(self, name: str) -> Callable[[int], None]:
        """An ``on_progress`` for :func:`run_pytest`: its report has two lines before the
        first test's (start, collected)."""
        return lambda lines: self.update(name, f"{max(lines - 2, 0)} tests done")


def _warm_kernels(shaped: Path, cache_dir: str, through: int | None) -> None:
    """Compile a training step's kernels (both dtypes) into ``cache_dir`` from the
    shaped reference (trusted): only a speed-up, so any failure is ignored."""
    has_stage_4 = through is None or through >= 4
    if not has_stage_4 or not (shaped / "project" / "warm_cache.py").exists():
        return
    path = [str(shaped), *site.getsitepackages(), site.getusersitepackages()]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(path), "MPLBACKEND": "Agg",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
           "NUMBA_CACHE_DIR": cache_dir, "NUMBA_ENABLE_CUDASIM": "1", **bytecode_env()}  # fmt: skip
    for dtype in ("float64", "float32"):
        try:
            subprocess.run(
                [sys.executable, "-S", "-m", "project.warm_cache", "--dtype", dtype],
                cwd=shaped, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, timeout=900, check=False,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return


def _graded_expression(tasks: Iterable[Task]) -> str:
    return " or ".join(t.marker for t in tasks)


def _describe(result: RunResult, nodeids: Iterable[str], by_node: dict[str, list[str]]) -> str:
    rows = []
    for nodeid in sorted(nodeids):
        tasks = ", ".join(by_node.get(nodeid, [])) or "?"
        message = result.tests[nodeid].message.strip().splitlines()
        rows.append(f"  task {tasks}: {nodeid}" + (f"\n    {message[-1]}" if message else ""))
    return "\n".join(rows)


def verify(
    root: Path,
    report: ReleaseReport,
    log: Callable[[str], None] = print,
    timeout: float = 1800,
    through: int | None = None,
) -> None:
    """Run checks 1-7 (see the module docstring); ReleaseError on the first that fails."""
    tasks = report.tasks
    check_regions(root, tasks)
    report.checks.append("regions and registry agree")
    log("checked: every region has a registry task and every task a region")
    _check_no_solution_left(root, report)
    report.checks.append("no solution text or marker left")
    log("checked: no solution text or marker is left in the handout")

    stages = sorted({t.stage for t in tasks})
    imports = "; ".join(f"import module{s}" for s in stages) or "pass"
    # -S with the site-packages folders on PYTHONPATH: no .pth file runs, so an editable
    # install of the reference cannot stand in for a module the handout lacks.
    path = [str(report.out_dir), *site.getsitepackages(), site.getusersitepackages()]
    proc = subprocess.run(
        [sys.executable, "-S", "-c", imports], cwd=report.out_dir, capture_output=True,
        text=True, timeout=600,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(path),
             "MPLBACKEND": "Agg", "PYTHONNOUSERSITE": "1", **bytecode_env()},
    )  # fmt: skip
    if proc.returncode != 0:
        raise ReleaseError(f"the handout does not import ({imports}):\n{proc.stderr[-3000:]}")
    expression = _graded_expression(tasks)
    shaped = shaped_reference(root, through)
    quick = {"HYPOTHESIS_PROFILE": "verify", **bytecode_env()}  # pass or fail is what counts
    # The reference is trusted: its kernels stay cached beside the shaped copy, so a
    # second release compiles nothing (a fresh cache costs minutes).
    kernels = {**quick, "NUMBA_CACHE_DIR": str(_kernel_cache(shaped) / "tests")}
    log("running the graded tests on the handout and on the reference, side by side")
    progress = _Progress(log, "graded tests")
    with ThreadPoolExecutor(max_workers=4) as pool:  # the runs are independent
        # With a cold kernel cache the reference's run compiles for minutes, one kernel
        # at a time, while the handout's run (stubs fail fast) is soon done: a third
        # process compiles the training step's kernels into the same cache from the
        # other end (project/warm_cache.py), and the reference's run loads them.
        pool.submit(_warm_kernels, shaped, kernels["NUMBA_CACHE_DIR"], through)
        handout_run = pool.submit(
            run_pytest, report.out_dir, [*test_dirs(tasks), "-m", expression, "-q"],
            timeout=timeout, no_site=True, env=quick,
            on_progress=progress.tests("handout"),
        )  # fmt: skip
        # The reference's tests in two processes, stages 0-2 and 3-4 (stage 3's tests on
        # the CUDA simulator are Python threads, stage 4's compile kernels of their own):
        # the second core is otherwise idle once the handout's run is done.
        groups = [
            g for g in ([t for t in tasks if t.stage <= 2], [t for t in tasks if t.stage > 2]) if g
        ]
        reference_runs = [
            pool.submit(
                run_pytest, shaped, [*test_dirs(tuple(group)), "-m", expression, "-q",
                                     "--minitorch-reach"],
                timeout=timeout, no_site=True, env=kernels,
                on_progress=progress.tests(f"reference (stages {group[0].stage}-"
                                           f"{group[-1].stage})"),
            )
            for group in groups
        ]  # fmt: skip
        handout = handout_run.result()
        reference = merge_runs([run.result() for run in reference_runs])
    if handout.collected is None or handout.collect_errors:
        detail = "\n".join(handout.collect_errors) or handout.output[-3000:]
        raise ReleaseError(f"the handout's tests do not collect:\n{detail}")
    report.checks.append("handout imports and its tests collect")
    log(f"checked: the handout imports and its tests collect ({len(handout.collected)} graded)")
    by_node = {item["nodeid"]: item["tasks"] for item in handout.collected}
    if not by_node:
        raise ReleaseError(f"no graded test was collected (marker expression {expression!r})")
    for task in tasks:
        if not any(task.id in ids for ids in by_node.values()):
            raise ReleaseError(f"task {task.id} has no graded test")
    if problem := handout.problem():
        raise ReleaseError(f"the run of the handout's tests failed: {problem}")
    passing = [n for n, r in handout.tests.items() if r.outcome == "passed" and n in by_node]
    missing = [n for n in by_node if n not in handout.tests]
    if passing:
        raise ReleaseError(
            "graded tests pass on the handout, so they grade nothing:\n"
            + _describe(handout, passing, by_node)
        )
    if missing:
        raise ReleaseError("graded tests did not run on the handout:\n  " + "\n  ".join(missing))
    report.checks.append("every graded test fails on the handout")
    log(f"checked: all {len(by_node)} graded tests fail on the handout")

    _verify_reference_tests(tasks, by_node, reference, report, log)
    verify_grading(shaped, report.out_dir, tasks, report, log)


def _verify_reference_tests(
    tasks: tuple[Task, ...],
    by_node: dict[str, list[str]],
    reference: RunResult,
    report: ReleaseReport,
    log: Callable[[str], None],
) -> None:
    """Checks 5 and 6, on the run of the reference's tests in the released shape."""
    if problem := reference.problem():
        raise ReleaseError(f"the run of the reference's tests failed: {problem}")
    failing = [n for n in by_node if reference.tests.get(n, _NOT_RUN).outcome != "passed"]
    if failing:
        for nodeid in failing:
            reference.tests.setdefault(nodeid, _NOT_RUN)
        raise ReleaseError(
            "graded tests fail on the reference:\n" + _describe(reference, failing, by_node)
        )
    report.checks.append("every graded test passes on the reference")
    log(f"checked: all {len(by_node)} graded tests pass on the reference (released shape)")

    check_reached(tasks, by_node, reference)
    report.checks.append("every listed function is called by its task's tests")
    log("checked: every function a task lists is called by that task's tests")


def verify_grading(
    shaped: Path,
    handout: Path,
    tasks: tuple[Task, ...],
    report: ReleaseReport,
    log: Callable[[str], None],
) -> None:
    """Check 7: grade the handout (every check must fail) and the shaped reference (every
    check must pass) with the shaped reference as the grader's tree."""
    from autograder.grade import GradeReport, Limits, grade, prepare, selected_tasks

    unsafe = bool(sandbox.bubblewrap_problem())  # trusted code on both sides
    ids = [t.id for t in tasks]
    limits = Limits(per_task_seconds=900)
    kernels = _kernel_cache(shaped)  # trusted code: cache kept

    log(f"computing the reference's answers to the graded checks ({len(ids)} tasks)")
    # Once, for both grades below (each would compute the same answers).
    # The kernels the run of the reference's tests compiled serve here too.
    try:
        prepared = prepare(shaped, selected_tasks(shaped, None, ids), limits=limits,
                           kernel_cache=kernels / "tests")  # fmt: skip
    except Exception as exc:  # the reference itself does not answer every check
        raise ReleaseError(f"minitorch grade fails in the released shape: {exc}") from exc
    progress = _Progress(log, "minitorch grade")
    log("grading the handout and the reference with those answers, side by side")

    def run(submission: Path, name: str) -> GradeReport:
        done: list[str] = []

        def task_done(line: str) -> None:
            if line.startswith("grading task "):
                done.append(line)
                progress.update(name, f"task {len(done)} of {len(ids)}")

        return grade(
            submission, root=shaped, task_ids=ids, limits=limits, unsafe_no_sandbox=unsafe,
            kernel_cache=kernels / name, log=task_done, prepared=prepared,
        )  # fmt: skip

    with ThreadPoolExecutor(max_workers=2) as pool:  # independent: both at once
        stub_run, full_run = pool.submit(run, handout, "handout"), pool.submit(run, shaped, "ref")
        try:
            stubs, full = stub_run.result(), full_run.result()
        except Exception as exc:  # the reference itself does not answer every check
            raise ReleaseError(f"minitorch grade fails in the released shape: {exc}") from exc
    passing = [c for s in stubs.scores for c in s.passed_ids]
    if passing:
        raise ReleaseError(
            "graded checks pass on the handout, so they grade nothing: " + ", ".join(passing)
        )
    total = sum(s.total for s in stubs.scores)
    failing = [f"  {check}: {why}" for s in full.scores for check, why in s.failures]
    failing += [f"  task {s.task.id}: {s.problem}" for s in full.scores if s.problem]
    failing += [f"  task {s.task.id}: NOT GRADED here: {s.not_graded}" for s in full.scores
                if s.not_graded]  # fmt: skip
    if failing or full.score != full.max_score:
        raise ReleaseError(
            f"the reference does not get full marks from minitorch grade in the released "
            f"shape ({full.score:g} / {full.max_score:g}):\n" + "\n".join(failing[:30])
        )
    report.checks.append("minitorch grade: handout 0, reference full marks")
    how = "without the sandbox (none here)" if unsafe else "in the sandbox"
    log(f"checked: minitorch grade ({how}) gives the handout 0 on all {total} graded checks "
        f"and the reference {full.score:g} / {full.max_score:g}")  # fmt: skip


def check_reached(
    tasks: Iterable[Task], by_node: dict[str, list[str]], reference: RunResult
) -> None:
    """Check 6: each task's tests (run with ``--minitorch-reach``) call every function
    the task lists; ReleaseError names the task and the functions no test calls."""
    reached: dict[str, set[str]] = {}
    for nodeid, ids in by_node.items():
        result = reference.tests.get(nodeid)
        for task_id in ids:
            reached.setdefault(task_id, set()).update(result.reached if result else ())
    for task in tasks:
        unreached = [f for f in task.functions if f not in reached.get(task.id, set())]
        if unreached:
            raise ReleaseError(
                f"task {task.id} lists functions that none of its tests calls (on the "
                f"reference): {', '.join(unreached)}; a stub must be what the tests check"
            )


VERIFY_NEEDS = Tool("the dev extra (pytest, Hypothesis)", install='pip install -e ".[dev]"',
                    modules=("pytest", "hypothesis"))  # fmt: skip
"""What the verification itself needs: it runs the graded tests."""


def check_prerequisites(tasks: tuple[Task, ...], root: Path = ROOT) -> None:
    """Refuse at once (ReleaseError) where the verification of ``tasks`` cannot succeed
    here: a tool a released task's tests and checks need (:attr:`Task.needs`: MPI for
    stage 6) or the verification itself needs is missing. The message names what is
    missing and the command that installs it, and the other ways out (an earlier
    ``--through``, ``--no-verify``). Without this, the release ran for minutes and then
    failed on the skipped tests of the tasks whose tool was missing."""
    from autograder.grade import CHECK_PATH, install_command

    # A program must be found both by the tests (this PATH) and by the checks (theirs).
    gaps = missing_tools(tasks, CHECK_PATH) or missing_tools(tasks)
    if (why := VERIFY_NEEDS.missing()) or gaps:
        gap = MissingTool(VERIFY_NEEDS, why, tasks) if why else gaps[0]
        if why:
            needed = "the verification runs the graded tests with it"
        else:
            needed = f"the tests and graded checks of {gap.task_ids} need it"
        way_out = ""
        first = min(t.stage for t in gap.tasks) if gap.tasks else 0
        if not why and first > 0:
            way_out = f"; or release only the stages before {first}: --through {first - 1}"
        raise ReleaseError(
            f"the verification cannot run here: {gap.tool.name} is missing ({gap.why}), and "
            f"{needed}. Install it ({gap.tool.install}) into this Python and release again: "
            f"{install_command(gap, root)}{way_out}; or write a copy for yourself, not "
            "verified and never for handing out: --no-verify"
        )


def release(
    out_dir: Path,
    through: int | None = None,
    root: Path = ROOT,
    force: bool = False,
    check: bool = True,
    log: Callable[[str], None] = print,
) -> ReleaseReport:
    """Write and (unless ``check`` is False) verify the handout in ``out_dir``.

    Refuses a non-empty ``out_dir`` unless ``force``; the folder is then replaced.
    """
    out_dir = out_dir.resolve()
    if check:  # before anything is written or removed
        check_prerequisites(
            tuple(t for t in available_tasks(root) if through is None or t.stage <= through),
            root,
        )
    if out_dir == root.resolve() or root.resolve().is_relative_to(out_dir):
        raise ReleaseError(f"refusing to release into {out_dir}: it contains the reference")
    if out_dir.exists() and any(out_dir.iterdir()):
        if not force:
            raise ReleaseError(f"{out_dir} is not empty; pass --force to replace it")
        shutil.rmtree(out_dir)
    if not any((root / rel).is_file() for t in course_tasks(root) for rel in t.files):
        raise ReleaseError(f"{root} holds no task files: is it the reference repository?")
    check_regions(root, available_tasks(root))  # malformed markers: refuse, don't crash
    report = write_handout(root, out_dir, through)
    log(f"wrote {report.files_copied} files to {out_dir} "
        f"({len(report.files_stubbed)} with stubs, tasks "
        f"{', '.join(t.id for t in report.tasks)})")  # fmt: skip
    if check:
        verify(root, report, log, through=through)
    return report

"""The task registry agrees with the code and the tests.

Each task's files exist and hold its solution regions; each function it names exists
and contains a region of that task; every region in the code names a registered task;
and every task has at least three tests carrying its marker.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.regions import find_regions
from autograder.registry import TASKS, Task, get_task
from autograder.release import check_regions

ROOT = Path(__file__).resolve().parents[1]


def test_ids_and_markers_are_unique_and_well_formed() -> None:
    ids = [t.id for t in TASKS]
    assert len(ids) == len(set(ids))
    for task in TASKS:
        assert re.fullmatch(r"\d+\.\d+", task.id)
        assert task.marker == f"task{task.stage}_{task.id.split('.')[1]}"
        assert task.points > 0 and task.title and task.files and task.functions
    assert get_task("0.3").title == TASKS[2].title
    with pytest.raises(KeyError, match=r"0\.1"):
        get_task("9.9")


def test_every_region_names_a_task_that_declares_its_file() -> None:
    """The release's own check: regions and registry agree (ReleaseError otherwise)."""
    check_regions(ROOT, TASKS)


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_every_listed_function_holds_a_region_of_its_task(task: Task) -> None:
    for qualified in task.functions:
        module_name, _, attr_path = qualified.partition(":")
        obj: object = importlib.import_module(module_name)
        for part in attr_path.split("."):
            obj = getattr(obj, part)
        obj = getattr(obj, "py_func", obj)  # a Numba dispatcher: its Python function
        source = inspect.getsource(obj)  # type: ignore[arg-type]
        ids = {region.task_id for region in find_regions(source, qualified)}
        assert task.id in ids, f"{qualified} has no region of {task.id}"
        file = inspect.getsourcefile(obj)  # type: ignore[arg-type]
        assert file is not None
        assert Path(file).resolve().relative_to(ROOT).as_posix() in task.files


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_a_tasks_stubs_are_exactly_its_listed_functions(task: Task) -> None:
    """A stub is a contract: the handout stubs exactly the functions the registry lists
    (the reference's own helpers live in ``omit`` regions, which leave no stub)."""
    stubbed = set()
    listed = set(task.functions)
    for path in task.files:
        module = path.removesuffix(".py").replace("/", ".")
        for region in find_regions((ROOT / path).read_text(encoding="utf-8"), path):
            if region.task_id == task.id and not region.omit:
                # A region in a kernel nested in the listed function (``tensor_map._map``)
                # stubs that function.
                name = f"{module}:{region.function}"
                while name not in listed and "." in name.split(":", 1)[1]:
                    name = name.rsplit(".", 1)[0]
                stubbed.add(name)
    assert stubbed == set(task.functions), (
        f"task {task.id}: stubbed but not listed {sorted(stubbed - set(task.functions))}, "
        f"listed but not stubbed {sorted(set(task.functions) - stubbed)}"
    )


COLLECT = """
import json, sys, pytest
class Markers:
    def __init__(self): self.counts = {}
    def pytest_collection_finish(self, session):
        for item in session.items:
            for mark in item.iter_markers():
                self.counts[mark.name] = self.counts.get(mark.name, 0) + 1
plugin = Markers()
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "tests"], plugins=[plugin])
print("COUNTS=" + json.dumps(plugin.counts))
sys.exit(code)
"""


def test_every_task_has_at_least_three_tests() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", COLLECT], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("COUNTS="))
    counts = json.loads(line.removeprefix("COUNTS="))
    for task in TASKS:
        assert counts.get(task.marker, 0) >= 3, f"task {task.id} has {counts.get(task.marker)}"


TABLE_ROW = re.compile(r"^\| (\d+\.\d+) \| (.+?) \| (\d+) \| (.+?) \|$", re.M)


@pytest.mark.parametrize("stage", sorted({t.stage for t in TASKS}))
def test_stage_readme_task_table_matches_the_registry(stage: int) -> None:
    """Each stage README's task table (id, title, points, files) is the registry's."""
    text = (ROOT / f"module{stage}" / "README.md").read_text(encoding="utf-8")
    rows = {m[1]: (m[2], int(m[3]), m[4]) for m in TABLE_ROW.finditer(text)}
    tasks = [t for t in TASKS if t.stage == stage]
    assert sorted(rows) == [t.id for t in tasks], f"module{stage}/README.md task table"
    for task in tasks:
        title, points, files = rows[task.id]
        assert (title, points) == (task.title, task.points), f"task {task.id} row"
        assert re.findall(r"`([^`]+)`", files) == list(task.files), f"task {task.id} files"

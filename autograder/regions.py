"""Solution regions: finding them in the reference and stubbing them for the handout.

A region is the lines between ``# BEGIN SOLUTION <task id> [kind]`` and
``# END SOLUTION`` (each alone on its line). In the handout a region becomes, at the
marker's indentation:

* (no kind) three lines: a student-facing begin line naming the task, the stub
  ``raise NotImplementedError("Task 0.4: implement ...")`` naming the task, the function
  and the file, so an unfinished task fails loudly, and an end line; the student
  replaces the stub with their code between the two lines;
* ``nowrite``: the same, with ``pass  # Task 3.1: implement ...`` as the stub, for places
  where raising is impossible (inside a CUDA kernel): the stub writes nothing;
* ``omit``: nothing at all. For the reference's own helpers (work splitting, packing,
  fast paths) that its solution of a task uses but the task does not ask for: a
  student writes the task's functions in any way they like, so the handout neither
  shows nor prescribes the reference's decomposition. Given code may not use a name
  that an ``omit`` region defines (the release checks this).

Every byte outside the regions is kept as it is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_WORD = "SOLUTION"  # spelled once, so this file holds no marker line itself
BEGIN = re.compile(
    rf"^(?P<indent>[ \t]*)# BEGIN {_WORD} (?P<task>\S+)(?: (?P<kind>nowrite|omit))?[ \t]*$"
)
END = re.compile(rf"^[ \t]*# END {_WORD}[ \t]*$")
_ANY = re.compile(rf"^\s*#\s*(BEGIN|END)\s+{_WORD}")
_DEF = re.compile(r"^(?P<indent>[ \t]*)(?:async[ \t]+)?(?:def|class)[ \t]+(?P<name>\w+)")


class RegionError(ValueError):
    """A file's solution markers are malformed (unclosed, nested, stray, misspelt)."""


@dataclass(frozen=True)
class Region:
    """One solution region of one file (line numbers are 1-based, markers included)."""

    path: str
    task_id: str
    begin: int
    end: int
    indent: str
    kind: str
    """``""`` (a stub that raises), ``"nowrite"`` or ``"omit"``."""
    function: str
    """The enclosing ``def``/``class`` names, dotted (``"Mul.forward"``), or ``""``."""

    @property
    def nowrite(self) -> bool:
        return self.kind == "nowrite"

    @property
    def omit(self) -> bool:
        return self.kind == "omit"

    def body(self, lines: list[str]) -> list[str]:
        """The solution lines between the markers."""
        return lines[self.begin : self.end - 1]


def _enclosing(lines: list[str], index: int, indent: str) -> str:
    """Dotted names of the defs/classes around line ``index`` (0-based)."""
    names: list[str] = []
    width = len(indent.expandtabs())
    for line in reversed(lines[:index]):
        m = _DEF.match(line)
        if m and len(m.group("indent").expandtabs()) < width:
            names.append(m.group("name"))
            width = len(m.group("indent").expandtabs())
            if width == 0:
                break
    return ".".join(reversed(names))


def find_regions(text: str, path: str) -> list[Region]:
    """Every region of a file, in order; RegionError names the file and line of any
    malformed marker."""
    lines = text.splitlines(keepends=True)
    regions: list[Region] = []
    open_at: tuple[int, re.Match[str]] | None = None
    for index, line in enumerate(lines):
        number = index + 1
        if m := BEGIN.match(line.rstrip("\r\n")):
            if open_at is not None:
                raise RegionError(f"{path}:{number}: region opened inside the region of line "
                                  f"{open_at[0] + 1}")  # fmt: skip
            open_at = (index, m)
        elif END.match(line.rstrip("\r\n")):
            if open_at is None:
                raise RegionError(f"{path}:{number}: END marker without a BEGIN")
            start, m = open_at
            regions.append(
                Region(
                    path=path,
                    task_id=m.group("task"),
                    begin=start + 1,
                    end=number,
                    indent=m.group("indent"),
                    kind=m.group("kind") or "",
                    function=_enclosing(lines, start, m.group("indent")),
                )
            )
            open_at = None
        elif _ANY.search(line):
            raise RegionError(f"{path}:{number}: malformed solution marker: {line.strip()!r}")
    if open_at is not None:
        raise RegionError(f"{path}:{open_at[0] + 1}: region of task "
                          f"{open_at[1].group('task')} is never closed")  # fmt: skip
    return regions


def begin_line(task_id: str) -> str:
    """The student-facing comment that opens a stubbed region (no indent, no newline)."""
    return f"# ---- Task {task_id}: your code starts here ----"


def end_line(task_id: str) -> str:
    """The student-facing comment that closes a stubbed region."""
    return f"# ---- Task {task_id}: your code ends here ----"


STUDENT_BEGIN = re.compile(r"^(?P<indent>[ \t]*)# ---- Task (?P<task>\S+): your code starts here")
"""Matches a handout's begin line (see :func:`begin_line`)."""
STUDENT_END = re.compile(r"^[ \t]*# ---- Task (?P<task>\S+): your code ends here")


STUB_MESSAGE = re.compile(r"^Task (?P<task>\d+\.\d+): implement (?P<what>.+?)(?: \(see |$)")
"""The message of a handout stub's NotImplementedError, as :func:`stub_line` writes it."""


def stub_line(region: Region, newline: str = "\n") -> str:
    """The stub statement that stands in for ``region`` in the handout (one line)."""
    stage = region.task_id.split(".")[0]
    what = f"{region.function} in {region.path}" if region.function else region.path
    message = f"Task {region.task_id}: implement {what} (see module{stage}/README.md)"
    if region.nowrite:
        return f"{region.indent}pass  # {message}{newline}"
    # Double quotes, as the READMEs show it and ruff formats it; json.dumps escapes
    # exactly as Python does for such a message (a path, a name, plain ASCII).
    return f"{region.indent}raise NotImplementedError({json.dumps(message)}){newline}"


def stub_block(region: Region, newline: str = "\n") -> list[str]:
    """The lines that replace ``region`` in the handout: none for an ``omit`` region,
    otherwise the begin line, the stub and the end line."""
    if region.omit:
        return []
    return [
        f"{region.indent}{begin_line(region.task_id)}{newline}",
        stub_line(region, newline),
        f"{region.indent}{end_line(region.task_id)}{newline}",
    ]


def stub_pattern(task_id: str) -> re.Pattern[str]:
    """Matches a stub that :func:`stub_line` wrote for ``task_id`` (either kind)."""
    tid = re.escape(task_id)
    return re.compile(
        rf"NotImplementedError\(\s*['\"]Task {tid}: implement |\bpass  # Task {tid}: implement "
    )


def _blank(line: str) -> bool:
    return not line.strip()


def stub_text(text: str, path: str, task_ids: set[str] | None = None) -> str:
    """``text`` with its regions (those of ``task_ids``, or all) replaced by stubs.

    An ``omit`` region is dropped; where blank lines stood on both of its sides, those
    after it are dropped too, so the handout keeps the file's spacing."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    cursor = 0
    for region in find_regions(text, path):
        if task_ids is not None and region.task_id not in task_ids:
            continue
        out.extend(lines[cursor : region.begin - 1])
        marker = lines[region.begin - 1]
        newline = marker[len(marker.rstrip("\r\n")) :] or "\n"
        out.extend(stub_block(region, newline))
        cursor = region.end
        if region.omit and (not out or _blank(out[-1])):
            while cursor < len(lines) and _blank(lines[cursor]):
                cursor += 1
            if cursor == len(lines):
                while out and _blank(out[-1]):
                    out.pop()
    out.extend(lines[cursor:])
    return "".join(out)


def omitted_names(text: str, path: str, task_ids: set[str] | None = None) -> dict[str, Region]:
    """Top-level ``def``/``class`` names that the ``omit`` regions of ``text`` define."""
    lines = text.splitlines(keepends=True)
    names: dict[str, Region] = {}
    for region in find_regions(text, path):
        if region.omit and (task_ids is None or region.task_id in task_ids):
            for line in region.body(lines):
                if (m := _DEF.match(line)) and not m.group("indent"):
                    names[m.group("name")] = region
    return names


def fill_text(text: str, bodies: dict[tuple[str, str], str]) -> tuple[str, set[tuple[str, str]]]:
    """A handout file with some stubs replaced by code, as a student would write it.

    ``bodies`` maps (task id, function as the stub names it, e.g. ``"Mul.forward"``) to
    the code (dedented; it is indented like the stub) that replaces the stub between
    that region's begin and end lines. Returns the new text and the keys it used. For
    the tooling's own tests: filling a fresh handout with known answers."""
    import textwrap

    lines = text.splitlines(keepends=True)
    used: set[tuple[str, str]] = set()
    out: list[str] = []
    for index, line in enumerate(lines):
        m = re.search(r"Task (\S+): implement (.+?) in ", line)
        previous = lines[index - 1] if index else ""
        if m and STUDENT_BEGIN.match(previous) and (m[1], m[2]) in bodies:
            key = (m[1], m[2])
            indent = line[: len(line) - len(line.lstrip())]
            newline = line[len(line.rstrip("\r\n")) :] or "\n"
            body = textwrap.dedent(bodies[key]).strip("\n")
            out.extend(indent + row + newline if row.strip() else newline
                       for row in body.splitlines())  # fmt: skip
            used.add(key)
        else:
            out.append(line)
    return "".join(out), used


def reference_bodies(
    text: str, path: str, task_ids: set[str] | None = None
) -> dict[tuple[str, str], str]:
    """(task id, function) -> the reference's solution body of each region (plain and
    ``nowrite`` regions; ``omit`` regions have no stub to fill)."""
    import textwrap

    lines = text.splitlines(keepends=True)
    bodies: dict[tuple[str, str], str] = {}
    for region in find_regions(text, path):
        if region.omit or (task_ids is not None and region.task_id not in task_ids):
            continue
        what = region.function or path
        bodies[(region.task_id, what)] = textwrap.dedent("".join(region.body(lines)))
    return bodies

"""Solution regions: finding them in the reference and stubbing them for the handout.

A region is the lines between ``# BEGIN SOLUTION <task id>`` and ``# END SOLUTION``
(each alone on its line). Stubbing replaces the region, markers included, with one line
at the marker's indentation:

* ``raise NotImplementedError("Task 0.4: ...")`` naming the task, the function and the
  file, so an unfinished task fails loudly;
* ``pass  # Task 3.1: ...`` for a region whose BEGIN marker ends in ``nowrite``, for
  places where raising is impossible (inside a CUDA kernel): the stub writes nothing.

Every byte outside the regions is kept as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_WORD = "SOLUTION"  # spelled once, so this file holds no marker line itself
BEGIN = re.compile(
    rf"^(?P<indent>[ \t]*)# BEGIN {_WORD} (?P<task>\S+)(?: (?P<kind>nowrite))?[ \t]*$"
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
    nowrite: bool
    function: str
    """The enclosing ``def``/``class`` names, dotted (``"Mul.forward"``), or ``""``."""

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
                    nowrite=m.group("kind") == "nowrite",
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


def stub_line(region: Region, newline: str = "\n") -> str:
    """The line that replaces ``region`` in the handout."""
    stage = region.task_id.split(".")[0]
    what = f"{region.function} in {region.path}" if region.function else region.path
    message = f"Task {region.task_id}: implement {what} (see module{stage}/README.md)"
    if region.nowrite:
        return f"{region.indent}pass  # {message}{newline}"
    return f"{region.indent}raise NotImplementedError({message!r}){newline}"


def stub_pattern(task_id: str) -> re.Pattern[str]:
    """Matches a stub that :func:`stub_line` wrote for ``task_id`` (either kind)."""
    tid = re.escape(task_id)
    return re.compile(
        rf"NotImplementedError\(\s*['\"]Task {tid}: implement |\bpass  # Task {tid}: implement "
    )


def stub_text(text: str, path: str, task_ids: set[str] | None = None) -> str:
    """``text`` with its regions (those of ``task_ids``, or all) replaced by stubs."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    cursor = 0
    for region in find_regions(text, path):
        if task_ids is not None and region.task_id not in task_ids:
            continue
        out.extend(lines[cursor : region.begin - 1])
        marker = lines[region.begin - 1]
        newline = marker[len(marker.rstrip("\r\n")) :] or "\n"
        out.append(stub_line(region, newline))
        cursor = region.end
    out.extend(lines[cursor:])
    return "".join(out)

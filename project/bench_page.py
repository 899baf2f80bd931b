"""The course's one benchmark page, ``docs/benchmarks.md``, written by the bench scripts.

Each bench script (``project/bench_fast.py``, ``bench_cnn.py``, ``bench_cuda.py``,
``bench_scalar.py``) shows its tables through a :class:`Report`; with ``--markdown``
it also replaces the section of the page that the same command wrote before (between
``<!-- begin COMMAND -->`` and ``<!-- end COMMAND -->``; a new command's section goes
above :data:`ANCHOR`) with those tables, headed by the
date, the machine (CPU model, cores, vector extensions, GPU) and the command that
made them. So every figure on the page says where and when it was measured, and
rerunning the command regenerates it. The chapters keep one short paragraph pointing
here; the page's other sections (notes, history) are kept as they are.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

PAGE = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
ANCHOR = "<!-- new measured sections go above this line -->"


def _cpuinfo(cpuinfo: Path = Path("/proc/cpuinfo")) -> tuple[str, set[str]]:
    """The first CPU's model name and flags (Linux); the platform's name and no flags
    elsewhere."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        for line in cpuinfo.read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
            if flags and name:
                break
    except OSError:
        pass
    return name, flags


def has_avx512(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool | None:
    """Whether the CPU has AVX-512 (``avx512f``); None where its flags cannot be read."""
    _, flags = _cpuinfo(cpuinfo)
    return ("avx512f" in flags) if flags else None


def cpu_name() -> str:
    """The CPU's model name and vector extensions (Linux: ``/proc/cpuinfo``)."""
    name, flags = _cpuinfo()
    vectors = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else ""
    return name + (f", {vectors}" if vectors else "")


def run_worker(module: str, args: list[str]) -> Any:
    """Run ``python -m MODULE --worker ARGS`` in a child process (a library per process,
    so thread pools never compete) and return the JSON of its ``RESULT=`` line, or None
    (with the child's stderr) when it gave none."""
    proc = subprocess.run([sys.executable, "-m", module, "--worker", *args],
                          capture_output=True, text=True)  # fmt: skip
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT="):
            return json.loads(line.removeprefix("RESULT="))
    sys.stderr.write(f"worker {' '.join(args)} failed:\n{proc.stderr[-2000:]}\n")
    return None


def machine() -> str:
    """One line naming this machine: CPU, cores, Python, NumPy and Numba versions."""
    import numpy

    try:
        import numba

        numba_version = f", numba {numba.__version__}"
    except ImportError:
        numba_version = ""
    return (f"{cpu_name()}, {os.cpu_count()} cores; Python {platform.python_version()}, "
            f"NumPy {numpy.__version__}{numba_version}")  # fmt: skip


def _cell(value: object) -> str:
    text = str(getattr(value, "plain", value)).replace("|", "\\|").replace("\n", " ")
    return re.sub(r"\[/?[a-z ]*\]", "", text)  # rich markup such as [green] ... [/]


def markdown_table(table: Table) -> str:
    """A rich Table as a Markdown table (its title as a bold line above it)."""
    headers = [_cell(c.header) for c in table.columns]
    rows = list(zip(*[[_cell(v) for v in c._cells] for c in table.columns], strict=True))
    align = ["---:" if c.justify == "right" else "---" for c in table.columns]
    lines = [f"**{_cell(table.title)}**", ""] if table.title else []
    lines += ["| " + " | ".join(headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


class Report:
    """Shows a bench script's tables on the console and keeps them for the page."""

    def __init__(self, name: str, console: Console, argv: Sequence[str] | None = None) -> None:
        self.name = name
        self.console = console
        arguments = [a for a in (sys.argv[1:] if argv is None else argv)
                     if not a.startswith("--markdown")]  # fmt: skip
        self.command = shlex.join(["python", "-m", f"project.{name}", *arguments])
        self.blocks: list[str] = []

    def show(self, table: Table) -> None:
        self.console.print(table)
        self.blocks.append(markdown_table(table))

    def note(self, text: str) -> None:
        """A line for the console and the page (what a table leaves unsaid)."""
        self.console.print(text)
        self.blocks.append(text)

    def section(self) -> str:
        today = datetime.date.today().isoformat()
        head = [f"### `{self.command}`", "",
                f"Measured {today} on {machine()}.", ""]  # fmt: skip
        return "\n".join([*head, "\n\n".join(self.blocks)])

    def write(self, page: Path = PAGE) -> Path:
        """Replace this command's section of ``page``; a command met for the first time
        gets a new section above :data:`ANCHOR` (or at the end, without one)."""
        key = self.command.removeprefix("python -m project.")
        begin, end = f"<!-- begin {key} -->", f"<!-- end {key} -->"
        block = f"{begin}\n{self.section()}\n{end}"
        text = page.read_text(encoding="utf-8") if page.exists() else "# Benchmarks\n"
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
        if pattern.search(text):
            text = pattern.sub(lambda _: block, text)
        elif ANCHOR in text:
            text = text.replace(ANCHOR, block + "\n\n" + ANCHOR, 1)
        else:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(text, encoding="utf-8")
        self.console.print(f"wrote its section of {page}")
        return page

"""``project/bench_page.py``: the bench scripts' tables on the one benchmark page."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from rich.table import Table

from project.bench_page import ANCHOR, Report, has_avx512, markdown_table


def _table(value: str) -> Table:
    table = Table(title="map, [bold]ms[/]")
    table.add_column("case")
    table.add_column("fast", justify="right")
    table.add_row("relu | 1e6", value)
    return table


def test_a_rich_table_becomes_a_markdown_table() -> None:
    assert markdown_table(_table("0.31")).splitlines() == [
        "**map, ms**", "", "| case | fast |", "| --- | ---: |", "| relu \\| 1e6 | 0.31 |",
    ]  # fmt: skip


def test_a_command_replaces_its_own_section_and_a_new_one_goes_above_the_anchor(
    tmp_path: Path,
) -> None:
    page = tmp_path / "benchmarks.md"
    page.write_text(f"# Benchmarks\n\n## Measured\n\n{ANCHOR}\n\n## Notes\n\nkept\n")
    quiet = Console(file=io.StringIO())
    for value in ("1.00", "2.00"):  # the same command twice: one section, the newer figure
        report = Report("bench_fast", quiet, ["--quick", "--markdown"])
        report.show(_table(value))
        report.write(page)
    other = Report("bench_fast", quiet, ["--dtype", "float32"])
    other.show(_table("3.00"))
    other.write(page)
    text = page.read_text()
    assert text.count("<!-- begin bench_fast --quick -->") == 1 and "1.00" not in text
    assert text.index("2.00") < text.index("3.00") < text.index(ANCHOR) < text.index("kept")
    assert "### `python -m project.bench_fast --quick`" in text  # --markdown left out
    assert "Measured 20" in text and " cores; Python " in text  # dated, with the machine


def test_avx512_is_read_from_the_cpus_flags(tmp_path: Path) -> None:
    """bench_fast leaves out its SkylakeX column where this is False (an AVX2 machine:
    OpenBLAS's AVX-512 kernels would die of an illegal instruction there)."""
    info = tmp_path / "cpuinfo"
    info.write_text("processor : 0\nmodel name : AMD EPYC\nflags : fpu sse2 avx avx2 fma\n")
    assert has_avx512(info) is False
    info.write_text("processor : 0\nmodel name : Intel Xeon\nflags : avx2 avx512f avx512bw\n")
    assert has_avx512(info) is True
    assert has_avx512(tmp_path / "missing") is None

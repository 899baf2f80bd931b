"""A hostile submission that looks for solutions from inside its grading run.

``SNOOP`` (appended to a declared file, so it runs when a check run imports it) lists
every file the run can read in its working folder and in the places a solution could be
(the grader's trees, named by the test; ``HOME``, ``TMPDIR``, ``/tmp``; a course package
installed in a site-packages folder), and reports, a line each on stderr (shown in the
task's report, because it then ends the run):

- ``visible=N``: the files readable in the working folder;
- ``holding=M``: readable files, anywhere searched, that hold a solution: a line that
  opens or closes a solution region, or a plain solution of ``tests/autograder/plain/``;
- ``first=PATH``: the first of those (``-`` if none).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from autograder.grade import GradeReport

SNOOP = """

def _snoop():
    import os, re, sys

    region = re.compile(rb"^[ \\t]*# (BEGIN|END) " + rb"SOLUTION", re.MULTILINE)
    plain = b"NAIVE_" + b"GEMM = "
    work = os.getcwd()
    places = [work, *{places!r}, os.environ.get("HOME", ""), os.environ.get("TMPDIR", ""), "/tmp"]
    for folder in sys.path:
        places += [os.path.join(folder, n) for n in ("module0", "module2", "tests", "autograder")]
    seen, visible, holding = set(), 0, []
    for place in [p for p in places if p]:
        for folder, _, names in os.walk(place):
            for name in names:
                path = os.path.realpath(os.path.join(folder, name))
                if path in seen:
                    continue
                seen.add(path)
                try:
                    with open(path, "rb") as f:
                        data = f.read(8 << 20)
                except OSError:
                    continue
                visible += place == work
                if region.search(data) or plain in data:
                    holding.append(path)
    for item in ("visible=%d" % visible, "holding=%d" % len(holding),
                 "first=" + (holding[0] if holding else "-")):
        sys.stderr.write("SNOOP-RESULT " + item + "\\n")
    sys.stderr.flush()
    os._exit(1)


_snoop()
"""


def snoop(places: Sequence[Path | str]) -> str:
    """The attack, searching ``places`` besides its own folders."""
    return SNOOP.format(places=[str(p) for p in places])


def snooped(text: str) -> dict[str, str]:
    """What the attack reported, from a task's report (or any text holding it)."""
    return dict(re.findall(r"SNOOP-RESULT (\w+)=(\S+)", text))


def snooped_in(report: GradeReport) -> dict[str, str]:
    return snooped("\n".join(s.report() for s in report.scores))

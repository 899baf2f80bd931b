"""The ``minitorch`` command: course tooling for instructors and students.

minitorch status                      progress per task (students)
minitorch test 0.4                    one task's tests, with where to look
minitorch test                        the list of tasks
minitorch doctor                      check the installation
minitorch release OUT [--through N]   write and verify the student handout
minitorch grade SUBMISSION --out DIR  grade an untrusted submission
minitorch gradescope-bundle OUT.zip   build a Gradescope autograder
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="minitorch", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    status = sub.add_parser("status", help="a table of every task: passed / failed / not started")
    status.add_argument(
        "--out",
        type=Path,
        default=None,
        help="also write classroom.json and summary.md here (feedback)",
    )
    test = sub.add_parser("test", help="run one task's tests (no task: list the tasks)")
    test.add_argument("task", nargs="?", default=None, help="task id, e.g. 0.4")
    test.add_argument("--full", action="store_true",
                      help="also print pytest's own report, and every failing test")  # fmt: skip
    for command in (status, test):
        command.add_argument(
            "--test-seconds", type=float, default=60.0, metavar="S",
            help="stop a test that runs longer (an infinite loop?) and say where it was; "
                 "0 for no limit (default 60)",
        )  # fmt: skip
        command.add_argument(
            "--memory-mb", type=int, default=4096, metavar="MB",
            help="memory the test run may use; 0 for no limit (default 4096)",
        )  # fmt: skip
    test.epilog = "Any other argument goes to pytest (e.g. -k NAME, -x)."
    doctor = sub.add_parser("doctor", help="check Python, numba, the CUDA route and matplotlib")
    doctor.add_argument("--instructor", action="store_true",
                        help="require what grading needs (a sandbox): FAIL, not WARN")  # fmt: skip
    rel = sub.add_parser("release", help="write the student handout and verify it")
    rel.add_argument("out_dir", type=Path)
    rel.add_argument("--through", type=int, default=None, help="release stages 0..N only")
    rel.add_argument("--force", action="store_true", help="replace a non-empty OUT_DIR")
    rel.add_argument("--no-verify", dest="verify", action="store_false",
                     help="skip the verification: fine for a copy of your own (a "
                     "self-learner's, a draft), never for handing out")  # fmt: skip
    grade = sub.add_parser(
        "grade",
        help="grade an untrusted submission (the instructor's grader: it runs from the "
        "reference; in a handout, minitorch status gives your points)",
    )
    grade.add_argument("submission", type=Path)
    grade.add_argument("--out", type=Path, required=True, help="folder for the results")
    grade.add_argument("--stage", type=int, default=None, help="grade only this stage")
    grade.add_argument("--task", dest="tasks", action="append", metavar="ID",
                       help="grade only this task (repeatable)")  # fmt: skip
    grade.add_argument("--reference-prerequisites", action="store_true",
                       help="use the reference for stages below --stage")  # fmt: skip
    grade.add_argument("--per-test-timeout", type=float, default=60.0, metavar="S",
                       help="time limit of one check")  # fmt: skip
    grade.add_argument("--task-timeout", type=float, default=600.0, metavar="S",
                       help="time limit of one task's sandboxed run")  # fmt: skip
    grade.add_argument("--memory-mb", type=int, default=4096, help="0 for no limit")
    grade.add_argument("--cache-mb", type=int, default=512, metavar="MB",
                       help="size of the grade's kernel cache")  # fmt: skip
    grade.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="grade without the bubblewrap sandbox (only for code you trust)",
    )
    bundle = sub.add_parser("gradescope-bundle", help="build a Gradescope autograder zip")
    bundle.add_argument("out_zip", type=Path)
    bundle.add_argument("--stage", type=int, default=None)
    bundle.add_argument("--reference-prerequisites", action="store_true")
    return ap


def say(console: Console, text: str, label: str = "", style: str = "") -> None:
    """Print ``text`` exactly as it is, after ``label`` (our own words) in ``style``.
    Everything that is not our own markup goes through here (or :func:`literal`):
    exception messages, test output, paths, what a subprocess printed, log lines. As
    markup, ``pip install -e ".[dist]"`` would lose its ``[dist]``, a ``[red]`` in a
    test's output would colour what follows, and ``:warning:`` would become an emoji;
    :func:`rich.markup.escape` leaves the emoji codes and doubles a trailing backslash."""
    from autograder.status import literal_line

    console.print(literal_line((label + " ", style), text) if label else literal_line(text))


def literal(console: Console) -> Callable[[str], None]:
    """A ``log`` that prints each line exactly as it is (:func:`say`)."""
    return lambda line: say(console, line)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; Ctrl-C (or SIGTERM) stops it, and every process it started,
    with one line and exit status 130 (143 for SIGTERM)."""
    import signal

    def terminate(signum: int, frame: object) -> None:
        raise SystemExit(143)

    signal.signal(signal.SIGTERM, terminate)
    try:
        return _main(argv)
    except KeyboardInterrupt:
        Console(stderr=True).print("[yellow]interrupted:[/] stopped, with every process it started")
        return 130


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    # The course's own options may come before or after the task; the rest is pytest's.
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "test":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.pytest_args = [a for a in extra if a != "--"]
    # soft_wrap: a long line (a test id, a path) is never broken by an inserted newline,
    # so piped output keeps it whole, and a terminal wraps it as it wraps any line.
    console = Console(soft_wrap=True)
    if args.command in ("status", "test"):
        from autograder.paths import other_tree_message

        problem = other_tree_message(Path.cwd())
        if problem:
            say(console, problem, f"minitorch {args.command}:", "red")
            return 2
    if args.command == "status":
        from autograder.status import RunLimits, run_status

        return run_status(console=console, out=args.out,
                          limits=RunLimits(args.test_seconds, args.memory_mb))  # fmt: skip
    if args.command == "test":
        from autograder.status import RunLimits, run_task_tests

        return run_task_tests(args.task, args.pytest_args, console=console, full=args.full,
                              limits=RunLimits(args.test_seconds, args.memory_mb))  # fmt: skip
    if args.command == "doctor":
        from autograder.doctor import run_doctor

        return run_doctor(console, instructor=args.instructor)
    if args.command == "release":
        from autograder.release import ReleaseError, release

        try:
            release(args.out_dir, args.through, force=args.force, check=args.verify,
                    log=literal(console))  # fmt: skip
        except ReleaseError as exc:
            say(console, str(exc), "release refused:", "red")
            return 1
        if args.verify:
            say(console, str(args.out_dir), "handout written and verified:", "green")
        else:
            say(console, str(args.out_dir), "handout written, NOT verified (--no-verify):",
                "yellow")  # fmt: skip
        return 0
    if args.command == "grade":
        from autograder.grade import Limits, grade_to, require_reference, selected_tasks
        from autograder.paths import ROOT

        try:  # a handout cannot grade: the checks' answers come from the reference
            require_reference(ROOT, selected_tasks(ROOT, args.stage, args.tasks))
        except (ValueError, KeyError) as exc:
            advice = "In a handout, your score is what minitorch status shows."
            say(console, f"{exc}. {advice}", "no grade issued:", "red")
            return 2
        limits = Limits(args.per_test_timeout, args.task_timeout, args.memory_mb or None,
                        args.cache_mb)  # fmt: skip
        report = grade_to(
            args.submission, args.out, stage=args.stage,
            reference_prerequisites=args.reference_prerequisites, limits=limits,
            log=literal(console), task_ids=args.tasks,
            unsafe_no_sandbox=args.unsafe_no_sandbox,
        )  # fmt: skip
        say(console, (args.out / "summary.md").read_text(encoding="utf-8"))
        if "SandboxUnavailable:" in report.grader_error:
            say(console, report.grader_error, "no grade issued:", "red")
            return 2
        say(console, f"score {report.score:g} / {report.max_score:g}; results in {args.out}")
        for line in report.not_graded_lines():  # last, where it is seen
            say(console, line, "!", "bold yellow")
        return 1 if report.grader_error or report.not_graded else 0
    if args.command == "gradescope-bundle":
        from autograder.bundle import build_gradescope_bundle
        from autograder.release import ReleaseError

        try:
            path = build_gradescope_bundle(
                args.out_zip, stage=args.stage,
                reference_prerequisites=args.reference_prerequisites,
            )  # fmt: skip
        except (ReleaseError, ValueError) as exc:
            say(console, str(exc), "bundle not built:", "red")
            return 1
        say(console, str(path), "Gradescope autograder written to")
        return 0
    raise AssertionError(args.command)


if __name__ == "__main__":
    raise SystemExit(main())

"""The student README that ``minitorch release`` writes into every handout.

The reference's README speaks to instructors and self-learners about the reference
solution; a handout needs a front door for the student who has just received it: what
the course is, how to set up, where to start, the released stages only, and what the
scripts do while tasks are unfinished. It is written from the registry and the stages
released, so it never names a stage, task or script the handout lacks.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from autograder.task import Task


@dataclass(frozen=True)
class Stage:
    number: int
    title: str
    summary: str


STAGES = (
    Stage(0, "scalar autodiff", "operators, higher-order functions, the Module tree, "
          "scalar autodiff (an iterative engine the tensor stage reuses), SGD/Adam, "
          "training a scalar network"),
    Stage(1, "tensors", "strided storage, views, broadcasting, a backend protocol "
          "with a simple backend, tensor autodiff on the stage-0 engine, Linear/MLP "
          "training"),
    Stage(2, "fast CPU kernels with Numba", "parallel map/zip/reduce, a parallel "
          "matrix multiply, (optional) a packed register-tiled matmul, fused optimizer "
          "steps"),
    Stage(3, "CUDA kernels with Numba", "thread-per-entry map/zip, shared-memory "
          "reductions, a tiled matmul, a fused optimizer kernel; runs on an NVIDIA GPU "
          "or, slowly, on Numba's CUDA simulator (the tests use it by themselves)"),
    Stage(4, "convolutional networks", "conv1d/conv2d forward and backward as "
          "parallel kernels, pooling, max/argmax, softmax, dropout, losses, layers, "
          "state dicts, (optional) batch normalization; CNNs trained on real "
          "handwritten digits"),
    Stage(5, "attention and a small GPT", "LayerNorm and GELU with their own "
          "backward, a masked softmax and attention, multi-head attention, a GPT with "
          "KV-cache generation, AdamW, clipping, a cosine schedule, a character "
          "tokenizer, (optional) fused kernels; a GPT trained on Shakespeare"),
    Stage(6, "past one process, past float32", "a ring all-reduce over MPI "
          "point-to-point messages and data-parallel training (parameter broadcast, "
          "bucketed gradient averaging, a distributed sampler; tasks 6.1 and 6.2 need "
          "the dist extra: pip install -e \".[dist]\"); half-precision storage (the "
          "bfloat16 codec), autocast and dynamic loss scaling (tasks 6.3 and 6.4)"),
)  # fmt: skip

SCRIPTS = (
    (0, "python -m project.train --backend scalar", "train a 2-D classifier with your "
     "scalar engine (any of simple, diag, split, xor, circle, spiral: --dataset)"),
    (1, "python -m project.train --backend simple", "the same with your tensors"),
    (1, "python -m project.regress_sin", "fit sin(x) with a tensor MLP"),
    (2, "python -m project.train", "the same classifier on your fast Numba backend"),
    (2, "python -m project.bench_fast", "your fast backend against NumPy"),
    (3, "python -m project.train --backend cuda", "on your CUDA backend (an NVIDIA "
     "GPU, or NUMBA_ENABLE_CUDASIM=1 for the slow simulator)"),
    (4, "python -m project.train_digits", "your CNN on the bundled 8x8 digits"),
    (4, "python -m project.train_mnist --data-dir DIR", "on MNIST read from IDX files "
     "you have (or --download)"),
    (4, "python -m project.train_sentiment", "a sentence CNN on an offline stand-in "
     "corpus"),
    (5, "python -m project.train_gpt", "your GPT on the bundled works of Shakespeare "
     "(exits 1 unless it beats the bigram model by 0.5 nats)"),
    (5, "python -m project.bench_gpt", "your GPT's training step and generation against "
     "PyTorch's, where PyTorch is installed"),
    (5, "python -m project.train_lstm", "an LSTM language model on the same works "
     "(task 5.6; exits 1 unless it ends below the bigram model)"),
    (5, "python -m project.compare_lm --seconds 120", "bigram, LSTM and GPT for the same "
     "time each: a table and a figure of their validation curves"),
    (6, "mpiexec -n 2 python -m project.train_gpt --ddp", "the same GPT data-parallel on "
     "two ranks (also project.train_digits --ddp)"),
    (6, "python -m project.bench_dist", "your ring all-reduce against MPI's, and "
     "training throughput on 1 and 2 ranks"),
    (6, "python -m project.train_gpt --amp bfloat16", "the GPT in mixed precision "
     "(--amp float16 with your loss scaler)"),
    (6, "python -m project.bench_amp", "one training step's activation memory and time "
     "in float32, bfloat16 and float16"),
)  # fmt: skip
"""(stage, command, what it does): the scripts a handout's README lists."""


def _main_job(stages: list[int]) -> list[str]:
    ladder = [
        (5, "stages 0-2, 4 and tasks 5.1-5.4 done: your GPT on the bundled works of "
            "Shakespeare (2000 steps, a few minutes; it exits 1 unless the validation loss "
            "ends 0.5 nats below the bigram model's; task 5.5 only makes it faster)"),
        (4, "stages 0-2 and 4 done: your digits CNN on the bundled handwritten digits "
            "(it exits 1 unless test accuracy reaches 95%)"),
        (2, "stages 0-2 done: the xor classifier on your fast backend"),
        (1, "stages 0-1 done: the xor classifier on your simple tensor backend"),
        (0, "stage 0 done: the xor classifier with your scalar engine"),
    ]  # fmt: skip
    return [f"- {text};" for s, text in ladder if s in stages] + [
        "- before that: the one-line message of the first task not done, exit status 3."
    ]


def _wrap(text: str, width: int = 88) -> str:
    """Wrap the prose of a Markdown text (not code blocks, tables or headings)."""
    out: list[str] = []
    code = False
    for line in text.split("\n"):
        if line.startswith("```"):
            code = not code
        if code or line.startswith(("```", "|", "#")) or len(line) <= width:
            out.append(line)
        elif line.startswith("- "):
            out.append(textwrap.fill(line, width, subsequent_indent="  ", break_on_hyphens=False))
        else:
            out.append(textwrap.fill(line, width, break_on_hyphens=False))
    return "\n".join(out)


def student_readme(tasks: tuple[Task, ...], course_name: str = "MiniTorch") -> str:
    """The README of a handout that releases ``tasks``."""
    stages = sorted({t.stage for t in tasks})
    first = tasks[0]
    lines = [
        f"# {course_name}: build a deep-learning framework, stage by stage",
        "",
        "In this course you write a PyTorch-style deep-learning framework from scratch, in "
        "Python, one numbered task at a time: each task is a few functions whose bodies "
        "are missing. The code around them is given and worth reading. A shared test "
        "suite checks every task; the grader runs checks of its own on the same contracts.",
        "",
        "## Quickstart",
        "",
        "Two commands, in this folder, with Python 3.11 or newer:",
        "",
        "```bash",
        "# 1. set up (once): a virtual environment with the framework's dependencies",
        'python3 -m venv .venv && .venv/bin/pip install -q -e ".[dev]"',
        "",
        "# 2. at any time: your progress, task by task, and the next step",
        ".venv/bin/minitorch status",
        "```",
        "",
        "`minitorch status` shows every task of this handout (passed / failed / not "
        "started, tests and points) and ends with the next step. A task you have not "
        "touched yet is shown as not started without running its tests, so a fresh "
        "handout's status takes seconds; each task you have written runs its tests, so "
        "it takes longer as you go (`minitorch test 6.3` runs one task's). After "
        "`source .venv/bin/activate` (Windows: `.venv\\Scripts\\activate`) "
        "plain `minitorch` and `python` use the environment; the commands below assume "
        "that.",
        "",
        "## Start here",
        "",
        f"Read [`module{first.stage}/README.md`](module{first.stage}/README.md), then run "
        f"`minitorch test {first.id}`.",
        "",
        "`minitorch test X.Y` runs one task's tests. While a function is still the "
        "handout's stub it prints one line for it (file, line, function); when a test "
        "fails it prints what was obtained and what was expected (with the example "
        "Hypothesis found), then the functions the failing tests called; when every test "
        "passes it names the next task. `minitorch test` alone lists the tasks; "
        "`minitorch test X.Y --full` adds pytest's own report. Plain pytest works too: "
        f"`python -m pytest -m task{first.id.replace('.', '_')}`.",
        "",
        "A test that runs longer than 60 s (not counting Numba's compiling) is stopped, "
        "and `minitorch test` names it and the last function of yours it was in (an "
        "infinite loop?); the run stops there. The tests may use 4 GB of memory. Change "
        "either with `--test-seconds S` or `--memory-mb MB` (0: no limit). A file that "
        "does not import (a syntax error) is shown as file, line and error. Ctrl-C stops "
        "the run and every process it started.",
        "",
        "## Where your code goes",
        "",
        "Each missing body sits between two lines that name its task:",
        "",
        "```python",
        "def mul(x: float, y: float) -> float:",
        '    """Return ``x * y``."""',
        "    # ---- Task 0.1: your code starts here ----",
        '    raise NotImplementedError("Task 0.1: implement mul in module0/operators.py '
        '(see module0/README.md)")',
        "    # ---- Task 0.1: your code ends here ----",
        "```",
        "",
        "Replace the `raise` line with your code between those two lines. You may add "
        "helper functions of your own in the same file. Do not change the tests (the "
        "grader uses its own copy) or the given code's signatures: the tests call them. "
        "Only the files that hold your tasks are graded; each stage's README lists them.",
        "",
        "## Stages in this handout",
        "",
        "| stage | assignment | you build | tasks |",
        "|---|---|---|---|",
    ]
    missing = set(stages) - {s.number for s in STAGES}
    if missing:
        raise ValueError(f"autograder/handout.py: STAGES has no row for stage(s) {sorted(missing)}")
    for stage in STAGES:
        if stage.number not in stages:
            continue
        ids = [t.id + ("*" if t.optional else "") for t in tasks if t.stage == stage.number]
        link = f"[`module{stage.number}/README.md`](module{stage.number}/README.md)"
        lines.append(
            f"| {stage.number}: {stage.title} | {link} | {stage.summary} | {', '.join(ids)} |"
        )
    if any(t.optional for t in tasks):
        lines += ["", "\\* optional: graded, but the framework works without it."]
    lines += [
        "",
        "Do the tasks in order: later tasks build on earlier ones. `import moduleN as mt` "
        "gives the whole framework as of stage N.",
        "",
        "## Running your framework",
        "",
        "`python -m project` is the main job. It runs the model of the latest stage whose "
        "tasks are done:",
        "",
        *_main_job(stages),
        "",
        "Other scripts, each usable once its stage is done:",
        "",
        "| stage | command | what it does |",
        "|---|---|---|",
        *[f"| {s} | `{cmd}` | {what} |" for s, cmd, what in SCRIPTS if s in stages],
        "",
        "A script that needs a task you have not done yet says so in one line, and exits "
        "with status 3:",
        "",
        "```",
        f"task {first.id} is not done yet: minitorch test {first.id}",
        "```",
        "",
        "Exit statuses: 0 done, 1 a training script's accuracy gate failed, 2 bad "
        "arguments or input, 3 a task (or stage) the script needs is not done yet. "
        "Outputs (logs, figures) go to `runs/`.",
        "",
        "## When something is wrong with the set-up",
        "",
        "`minitorch doctor` checks Python, numba, matplotlib and the CUDA route, and says "
        "what to fix.",
        "",
    ]
    return _wrap("\n".join(lines))

"""The course's main job: ``python -m project``.

It trains the model of the latest stage whose tasks are done, so it works at every
point of the course (optional tasks and stage 3, which needs a GPU, aside):

* stage 5 (with 0-2 and 4): the character-level GPT on the bundled Shakespeare
  (``project/train_gpt.py``): 2000 AdamW steps of nanoGPT's CPU configuration, a line
  per evaluation, ``runs/gpt/`` (log, parameters, loss curves, an attention map,
  samples); exits 1 unless the gate holds (validation loss 0.5 nats below the bigram
  model's). Stage 5's optional task 5.5 only makes it faster, and its optional task
  5.6 (recurrent networks) is not needed (``python -m project.train_lstm`` uses it);
* stage 4 (with 0-2): the digits CNN on the handwritten digits bundled with the
  project, fully offline (``project/train_digits.py``): the model summary, a progress
  bar and one line per epoch, ``runs/digits/`` (log, parameters, four figures); exits 1
  unless the gate holds (test accuracy >= 95% and first-layer weights moved);
* stage 2: the xor classifier on the fast Numba backend (``project/train.py``);
* stage 1: the same on the simple tensor backend;
* stage 0: the same with the scalar engine.

Before stage 0 is done it prints ``task 0.1 is not done yet: minitorch test 0.1`` and
exits with status 3 (see ``project/guard.py``). Arguments go to the chosen script.
"""

from __future__ import annotations

import importlib
import sys

from project.guard import EXIT_NOT_DONE, first_unfinished, stage_present, stages_done

JOBS = (
    ((0, 1, 2, 4, 5), "the GPT on Shakespeare (stage 5)", "project.train_gpt", None),
    ((0, 1, 2, 4), "the digits CNN (stage 4)", "project.train_digits", None),
    ((0, 1, 2), "the xor classifier on the fast backend (stage 2)", "project.train", "fast"),
    ((0, 1), "the xor classifier on the simple tensor backend (stage 1)", "project.train",
     "simple"),
    ((0,), "the xor classifier with the scalar engine (stage 0)", "project.train", "scalar"),
)  # fmt: skip
"""(stages it needs, what it trains, module, backend), latest stage first."""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    for stages, what, module, backend in JOBS:
        if not stages_done(stages):
            continue
        later = [s for s in range(stages[-1] + 1, 7) if s != 3 and stage_present(s)]
        pending = first_unfinished(later) if later else None
        importlib.import_module(module)  # a file that does not import says so first
        if stages[-1] < 4:
            print(f"Training {what}." + (f" Next: {pending}" if pending else ""), flush=True)
        if module == "project.train_gpt":
            from project.train_gpt import main as train_gpt

            return train_gpt(argv)
        if module == "project.train_digits":
            from project.train_digits import main as train_digits

            return train_digits(argv)
        from project.train import main as train

        return train(argv, backend=backend)
    message = first_unfinished((0,))
    print(message, file=sys.stderr)
    return EXIT_NOT_DONE


if __name__ == "__main__":
    raise SystemExit(main())

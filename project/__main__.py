"""The course's main job: ``python -m project``.

Trains the 2-10-10-1 classifier with stage 1's tensors (SimpleBackend) on the xor
dataset with the documented defaults (see ``project/train.py``), prints the time per
epoch and saves ``runs/simple_xor/log.csv`` and ``figure.png``.
"""

from project.train import main

raise SystemExit(main())

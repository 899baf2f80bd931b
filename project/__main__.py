"""The course's main job: ``python -m project``.

While the repository has stage 0, it trains the scalar network on the xor dataset with
the documented defaults (see ``project/train_scalar.py``) and saves its figure.
"""

from project.train_scalar import main

raise SystemExit(main())

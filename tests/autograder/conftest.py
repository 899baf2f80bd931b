"""The toy course (``toy/``) is a course tree of its own, not part of this suite: its
tests run only inside the trees that ``tests/autograder/toy.py`` builds."""

collect_ignore = ["toy"]

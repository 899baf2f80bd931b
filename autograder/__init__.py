"""Course tooling: the ``minitorch`` command (see ``autograder/README.md``).

Nothing is imported here: a course's ``autograder/registry.py`` needs to define only
``TASKS`` (the toy course's does no more), and each module imports what it uses.
"""

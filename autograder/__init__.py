"""Course tooling: the task registry (and, later, status / test / grade / release)."""

from autograder.registry import TASKS, Task, get_task, tasks_for_stage

__all__ = ["TASKS", "Task", "get_task", "tasks_for_stage"]

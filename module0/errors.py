"""Typed errors shared by every stage, so callers can catch one family: MiniTorchError."""

from __future__ import annotations


class MiniTorchError(Exception):
    """Base class of the framework's own errors."""


class ForwardTypeError(MiniTorchError, TypeError):
    """A Function's forward returned a value of the wrong type."""


class ParameterNameError(MiniTorchError, ValueError):
    """A parameter name collides with a child module's name (or the reverse)."""


class UnknownDatasetError(MiniTorchError, KeyError):
    """A dataset was requested by a name the registry does not know."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0]) if self.args else ""


class GraphReleasedError(MiniTorchError, RuntimeError):
    """Backward ran through a part of the graph whose saved values were already freed."""

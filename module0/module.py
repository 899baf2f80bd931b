"""Task 0.3: Module and Parameter, the tree that holds a model's weights.

A Module keeps its Parameters and its child Modules in two dictionaries, filled
automatically by attribute assignment (``self.w = Parameter(...)``,
``self.layer = Linear(...)``), so the whole tree can be walked: ``named_parameters``
gives dotted names like ``"layer1.weight_0_1"``, and ``train``/``eval`` reach every
descendant.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from module0.errors import ParameterNameError

call_hook: Callable[[Module, tuple[Any, ...], dict[str, Any]], Any] | None = None
"""While stage 1's ``record_modules`` records which Module made which graph node, the
function every ``Module.__call__`` goes through (it runs ``forward``); None otherwise,
so a call costs one comparison more when no one records."""


class Parameter:
    """A value a Module owns and an optimizer updates (a Scalar now, a Tensor later).

    The value is marked as wanting a gradient when it supports ``requires_grad``.
    """

    __slots__ = ("name", "value")

    def __init__(self, value: Any, name: str | None = None) -> None:
        self.value = value
        self.name = name
        self._mark_trainable()

    def _mark_trainable(self) -> None:
        if hasattr(self.value, "requires_grad"):
            self.value.requires_grad = True
        if self.name is not None and hasattr(self.value, "name"):
            self.value.name = self.name

    def update(self, value: Any) -> None:
        """Replace the value (keeping it trainable)."""
        self.value = value
        self._mark_trainable()

    def __repr__(self) -> str:
        return f"Parameter({self.value!r})"

    def __str__(self) -> str:
        return str(self.value)


class Module:
    """Base class of every model and layer.

    Attributes:
        training: True in training mode (the default), False after :meth:`eval`.
    """

    _modules: dict[str, Module]
    _parameters: dict[str, Parameter]
    training: bool

    def __init__(self) -> None:
        # Written through __dict__ because __setattr__ below reads these dictionaries.
        self.__dict__["_modules"] = {}
        self.__dict__["_parameters"] = {}
        self.__dict__["training"] = True

    def _check_init(self) -> None:
        if "_modules" not in self.__dict__:
            raise RuntimeError(
                f"{type(self).__name__}.__init__ must call super().__init__() before "
                "assigning parameters or modules"
            )

    # -- building the tree ------------------------------------------------------------

    def add_parameter(self, name: str, value: Any) -> Parameter:
        """Register ``value`` as a Parameter called ``name`` and return it."""
        self._check_init()
        if name in self._modules:
            raise ParameterNameError(
                f"{type(self).__name__}: cannot add parameter {name!r}: a child module "
                "already has that name"
            )
        if isinstance(value, Parameter):
            param = value
            param.name = name
            param._mark_trainable()
        else:
            param = Parameter(value, name)
        self._parameters[name] = param
        return param

    def __setattr__(self, name: str, value: Any) -> None:
        registered = self.__dict__.get("_parameters", {})
        if name in registered and not isinstance(value, (Parameter, Module)):
            raise TypeError(
                f"{type(self).__name__}.{name} is a Parameter; assign a Parameter, or update "
                f"its value with self.{name}.update(...), not a {type(value).__name__}"
            )
        if isinstance(value, Parameter):
            self.add_parameter(name, value)
        elif isinstance(value, Module):
            self._check_init()
            if name in self._parameters:
                raise ParameterNameError(
                    f"{type(self).__name__}: cannot add module {name!r}: a parameter "
                    "already has that name"
                )
            self._modules[name] = value
        else:
            super().__setattr__(name, value)

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails.
        d = self.__dict__
        if name in ("_modules", "_parameters", "training"):
            self._check_init()
        if name in d.get("_parameters", ()):
            return d["_parameters"][name]
        if name in d.get("_modules", ()):
            return d["_modules"][name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- walking the tree (task 0.3) --------------------------------------------------

    def modules(self) -> list[Module]:
        """The direct children of this module, in the order they were added."""
        # BEGIN SOLUTION 0.3
        return list(self._modules.values())
        # END SOLUTION

    def train(self, mode: bool = True) -> Module:
        """Set training mode (``mode=False``: evaluation mode) on this module and every
        descendant; return self."""
        # BEGIN SOLUTION 0.3
        stack: list[Module] = [self]
        while stack:
            module = stack.pop()
            module.__dict__["training"] = mode
            stack.extend(module._modules.values())
        return self
        # END SOLUTION

    def eval(self) -> Module:
        """Set evaluation mode on this module and every descendant; return self."""
        # BEGIN SOLUTION 0.3
        return self.train(False)
        # END SOLUTION

    def named_parameters(self) -> Sequence[tuple[str, Parameter]]:
        """Every parameter in the tree with its dotted path (``"layer1.weight"``).

        This module's own parameters come first, then each child's, depth first, in
        the order they were added.
        """
        # BEGIN SOLUTION 0.3
        result: list[tuple[str, Parameter]] = list(self._parameters.items())
        for child_name, child in self._modules.items():
            for name, param in child.named_parameters():
                result.append((f"{child_name}.{name}", param))
        return result
        # END SOLUTION

    def parameters(self) -> Sequence[Parameter]:
        """Every parameter in the tree, in the order of :meth:`named_parameters`."""
        # BEGIN SOLUTION 0.3
        return [param for _, param in self.named_parameters()]
        # END SOLUTION

    # -- using it ---------------------------------------------------------------------

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if call_hook is None:
            return self.forward(*args, **kwargs)
        return call_hook(self, args, kwargs)  # module1.graph.record_modules is recording

    def to(self, dtype: Any) -> Module:
        """Convert, in place, every parameter of the tree and every other tensor a module
        holds (a frozen embedding table) to ``dtype`` with the value's own ``.to``
        (tensors: float32 or float64); returns the module, as PyTorch's ``Module.to``.
        Scalars have one precision only: TypeError."""
        pending: list[Module] = [self]
        while pending:
            module = pending.pop()
            pending.extend(module.__dict__["_modules"].values())
            for param in module.__dict__["_parameters"].values():
                if not hasattr(param.value, "to"):
                    raise TypeError(f"{type(module).__name__}: a {type(param.value).__name__} "
                                    "parameter has no dtype to convert")  # fmt: skip
                param.update(param.value.to(dtype).detach())
            for name, value in list(module.__dict__.items()):
                if hasattr(value, "to") and hasattr(value, "dtype") and hasattr(value, "shape"):
                    object.__setattr__(module, name, value.to(dtype).detach())
        return self

    def float(self) -> Module:
        """``to(float32)``."""
        return self.to("float32")

    def double(self) -> Module:
        """``to(float64)``."""
        return self.to("float64")

    def num_parameters(self) -> int:
        """How many numbers the tree's parameters hold (a Scalar counts 1, a tensor its
        number of entries)."""
        return sum(getattr(p.value, "size", 1) for p in self.parameters())

    def __repr__(self) -> str:
        own = ", ".join(self._parameters)
        head = f"{type(self).__name__}({own})" if own else f"{type(self).__name__}()"
        if not self._modules:
            return head
        lines = [f"{type(self).__name__}("]
        if own:
            lines.append(f"  parameters: {own}")
        for name, child in self._modules.items():
            child_repr = repr(child).replace("\n", "\n  ")
            lines.append(f"  ({name}): {child_repr}")
        lines.append(")")
        return "\n".join(lines)

"""Provided Module infrastructure (not task code): name clashes, a forgotten
``super().__init__()``, and ``repr``. These tests carry no task marker; they pass on
the student handout too.
"""

from __future__ import annotations

import pytest

from module0.errors import MiniTorchError, ParameterNameError
from module0.module import Module, Parameter
from module0.scalar import Scalar


class Leaf(Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = Parameter(Scalar(1.0))
        self.bias = Parameter(2.0)


class Holder(Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = Parameter(3.0)
        self.child = Leaf()


class Forgetful(Module):
    def __init__(self) -> None:
        self.weight = Parameter(1.0)


class ForgetfulWithChild(Module):
    def __init__(self) -> None:
        self.child = Leaf()


def test_parameter_name_clashing_with_child_module_raises() -> None:
    holder = Holder()
    with pytest.raises(ParameterNameError) as excinfo:
        holder.add_parameter("child", 5.0)
    message = str(excinfo.value)
    assert "'child'" in message
    assert "module" in message
    assert holder.child is not None and isinstance(holder.child, Leaf)


def test_parameter_assignment_clashing_with_child_module_raises() -> None:
    holder = Holder()
    with pytest.raises(ParameterNameError, match="child"):
        holder.child = Parameter(5.0)  # type: ignore[assignment]
    assert isinstance(holder.child, Leaf)


def test_module_assignment_clashing_with_parameter_raises() -> None:
    holder = Holder()
    with pytest.raises(ParameterNameError) as excinfo:
        holder.scale = Leaf()  # type: ignore[assignment]
    message = str(excinfo.value)
    assert "'scale'" in message
    assert "parameter" in message
    assert isinstance(holder.scale, Parameter)
    assert holder.scale.value == 3.0


def test_parameter_name_error_is_a_value_error_and_minitorch_error() -> None:
    with pytest.raises(ValueError):
        Holder().add_parameter("child", 0.0)
    with pytest.raises(MiniTorchError):
        Holder().scale = Leaf()  # type: ignore[assignment]


@pytest.mark.parametrize("cls", [Forgetful, ForgetfulWithChild])
def test_forgetting_super_init_raises_helpful_runtime_error(cls: type[Module]) -> None:
    with pytest.raises(RuntimeError) as excinfo:
        cls()
    message = str(excinfo.value)
    assert cls.__name__ in message
    assert "super().__init__()" in message


def test_add_parameter_without_super_init_raises() -> None:
    module = Module.__new__(Module)
    with pytest.raises(RuntimeError, match=r"super\(\)\.__init__\(\)"):
        module.add_parameter("w", 1.0)


def test_repr_of_leaf_and_empty_module() -> None:
    assert repr(Module()) == "Module()"
    assert repr(Leaf()) == "Leaf(weight, bias)"


def test_repr_of_tree_names_children_and_classes() -> None:
    text = repr(Holder())
    assert text.startswith("Holder(")
    assert "(child): Leaf(weight, bias)" in text
    assert "parameters: scale" in text
    assert text.rstrip().endswith(")")


def test_repr_of_three_level_tree_nests_in_order() -> None:
    class Top(Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = Holder()
            self.second = Leaf()

    text = repr(Top())
    for fragment in ("Top(", "(first): Holder(", "(child): Leaf(weight, bias)", "(second): Leaf("):
        assert fragment in text
    assert text.index("(first)") < text.index("(child)") < text.index("(second)")
    child_line = next(line for line in text.splitlines() if "(child)" in line)
    first_line = next(line for line in text.splitlines() if "(first)" in line)
    indent = len(child_line) - len(child_line.lstrip())
    assert indent > len(first_line) - len(first_line.lstrip())


def test_assigning_a_plain_value_over_a_parameter_is_rejected() -> None:
    leaf = Leaf()
    with pytest.raises(TypeError, match=r"Leaf\.weight is a Parameter"):
        leaf.weight = 5.0  # type: ignore[assignment]


def test_add_parameter_renames_a_named_parameter() -> None:
    m = Module()
    p = m.add_parameter("new", Parameter(2.0, name="old"))
    assert p.name == "new"


def test_missing_super_init_is_explained_on_any_access() -> None:
    class Forgetful(Module):
        def __init__(self) -> None:
            pass

    with pytest.raises(RuntimeError, match=r"super\(\)\.__init__\(\)"):
        Forgetful()._parameters  # noqa: B018

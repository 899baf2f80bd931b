"""Task 0.3: walking the Module tree (modules, named_parameters, parameters, train/eval).

The tree used throughout has three levels, and names chosen so that insertion order
differs from alphabetical order::

    Root                 own: zeta, alpha
    ├── mid: Middle      own: gamma   (its child is added *before* gamma)
    │   └── inner: Leaf  own: weight, bias
    └── leaf: Leaf       own: weight, bias

Names, values, modes and lists that come back from the Module code go through the
``exact_*`` helpers of ``tests/strict.py`` before they are compared; modules and
parameters are compared by identity (``is``).
"""

from __future__ import annotations

import pytest

from module0.module import Module, Parameter
from module0.scalar import Scalar
from tests.strict import exact_bool, exact_float, exact_int, exact_list, exact_str, exact_tuple

pytestmark = pytest.mark.task0_3

EXPECTED_NAMES = [
    "zeta",
    "alpha",
    "mid.gamma",
    "mid.inner.weight",
    "mid.inner.bias",
    "leaf.weight",
    "leaf.bias",
]


class Leaf(Module):
    """Two plain-float parameters, no children."""

    def __init__(self, weight: float, bias: float) -> None:
        super().__init__()
        self.weight = Parameter(weight)
        self.bias = Parameter(bias)


class Middle(Module):
    """One child, then one own (Scalar) parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = Leaf(3.0, 4.0)
        self.gamma = Parameter(Scalar(2.5))


class Root(Module):
    """Two own Scalar parameters and two children."""

    def __init__(self) -> None:
        super().__init__()
        self.zeta = Parameter(Scalar(1.0))
        self.alpha = Parameter(Scalar(-1.0))
        self.mid = Middle()
        self.leaf = Leaf(5.0, 6.0)


def all_modules(root: Module) -> list[Module]:
    """Every module of the test tree, found through attribute access only."""
    return [root, root.mid, root.mid.inner, root.leaf]


def param_value(p: Parameter) -> float:
    value = p.value
    return exact_float(value.data if isinstance(value, Scalar) else value)


def names_of(module: Module) -> list[str]:
    """The names ``named_parameters`` gives, each checked to be a real str."""
    return [exact_str(name) for name, _ in module.named_parameters()]


def modes(root: Module) -> list[bool]:
    """The ``training`` flag of every module of the test tree."""
    return [exact_bool(m.training) for m in all_modules(root)]


# -- modules ----------------------------------------------------------------------------


def test_modules_are_direct_children_in_insertion_order() -> None:
    root = Root()
    children = exact_list(root.modules(), item=None)
    assert len(children) == 2
    assert children[0] is root.mid
    assert children[1] is root.leaf


def test_modules_excludes_grandchildren_and_self() -> None:
    root = Root()
    children = exact_list(root.modules(), item=None)
    assert all(child is not root.mid.inner for child in children)
    assert all(child is not root for child in children)
    mid_children = exact_list(root.mid.modules(), item=None)
    assert len(mid_children) == 1
    assert mid_children[0] is root.mid.inner


def test_modules_of_leaf_is_empty() -> None:
    assert list(Leaf(1.0, 2.0).modules()) == []
    assert list(Module().modules()) == []


# -- named_parameters and parameters ----------------------------------------------------


def test_named_parameters_dotted_names_in_documented_order() -> None:
    assert names_of(Root()) == EXPECTED_NAMES


def test_named_parameters_pairs_names_with_the_right_objects() -> None:
    root = Root()
    named = list(root.named_parameters())
    expected_objects = [
        root.zeta,
        root.alpha,
        root.mid.gamma,
        root.mid.inner.weight,
        root.mid.inner.bias,
        root.leaf.weight,
        root.leaf.bias,
    ]
    assert len(named) == len(expected_objects)
    for (_, param), expected in zip(named, expected_objects, strict=True):
        assert param is expected
    values = [param_value(p) for _, p in named]
    assert values == [1.0, -1.0, 2.5, 3.0, 4.0, 5.0, 6.0]


def test_named_parameters_of_subtrees() -> None:
    root = Root()
    assert names_of(root.mid) == ["gamma", "inner.weight", "inner.bias"]
    assert names_of(root.mid.inner) == ["weight", "bias"]
    assert names_of(root.leaf) == ["weight", "bias"]
    assert list(Module().named_parameters()) == []


def test_parameters_follow_named_parameters_order() -> None:
    root = Root()
    params = list(root.parameters())
    named = list(root.named_parameters())
    assert len(params) == 7
    assert all(isinstance(p, Parameter) for p in params)
    assert [id(p) for p in params] == [id(p) for _, p in named]
    assert [param_value(p) for p in params] == [1.0, -1.0, 2.5, 3.0, 4.0, 5.0, 6.0]


def test_parameters_counts_of_subtrees() -> None:
    root = Root()
    assert len(list(root.mid.parameters())) == 3
    assert len(list(root.leaf.parameters())) == 2
    assert list(Module().parameters()) == []
    assert exact_int(root.num_parameters()) == 7


def test_scalar_parameters_are_trainable() -> None:
    root = Root()
    scalars = [p.value for p in root.parameters() if isinstance(p.value, Scalar)]
    assert len(scalars) == 3
    assert all(exact_bool(s.requires_grad) for s in scalars)


# -- add_parameter ----------------------------------------------------------------------


def test_add_parameter_returns_parameter_listed_under_its_name() -> None:
    leaf = Leaf(1.0, 2.0)
    added = leaf.add_parameter("extra", 7.0)
    assert isinstance(added, Parameter)
    assert exact_float(added.value) == 7.0
    named = list(leaf.named_parameters())
    assert [exact_str(n) for n, _ in named] == ["weight", "bias", "extra"]
    assert exact_tuple(named[2])[1] is added
    assert leaf.extra is added


def test_add_parameter_deep_in_tree_shows_dotted_name() -> None:
    root = Root()
    late = root.mid.inner.add_parameter("late", Scalar(9.0))
    named = {exact_str(n): p for n, p in root.named_parameters()}
    assert named["mid.inner.late"] is late
    names = names_of(root)
    assert names == [*EXPECTED_NAMES[:5], "mid.inner.late", *EXPECTED_NAMES[5:]]
    assert exact_bool(late.value.requires_grad)


# -- train / eval -----------------------------------------------------------------------


def test_eval_reaches_every_descendant_and_returns_self() -> None:
    root = Root()
    assert root.eval() is root
    assert modes(root) == [False, False, False, False]
    assert exact_bool(root.mid.inner.training) is False


def test_train_reaches_every_descendant_and_returns_self() -> None:
    root = Root()
    root.eval()
    assert root.train() is root
    assert modes(root) == [True, True, True, True]
    assert exact_bool(root.mid.inner.training) is True


def test_train_restores_a_manually_switched_grandchild() -> None:
    root = Root()
    root.mid.inner.training = False
    root.leaf.training = False
    root.train()
    assert exact_bool(root.mid.inner.training) is True
    assert exact_bool(root.leaf.training) is True


def test_eval_on_subtree_leaves_rest_untouched() -> None:
    root = Root()
    assert root.mid.eval() is root.mid
    assert exact_bool(root.training) is True
    assert exact_bool(root.leaf.training) is True
    assert exact_bool(root.mid.training) is False
    assert exact_bool(root.mid.inner.training) is False
    root.mid.train()
    assert modes(root) == [True, True, True, True]

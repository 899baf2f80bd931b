"""Task 0.3: walking the Module tree (modules, named_parameters, parameters, train/eval).

The tree used throughout has three levels, and names chosen so that insertion order
differs from alphabetical order::

    Root                 own: zeta, alpha
    ├── mid: Middle      own: gamma   (its child is added *before* gamma)
    │   └── inner: Leaf  own: weight, bias
    └── leaf: Leaf       own: weight, bias
"""

from __future__ import annotations

import pytest

from module0.module import Module, Parameter
from module0.scalar import Scalar

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
    return p.value.data if isinstance(p.value, Scalar) else p.value


# -- modules ----------------------------------------------------------------------------


def test_modules_are_direct_children_in_insertion_order() -> None:
    root = Root()
    children = root.modules()
    assert len(children) == 2
    assert children[0] is root.mid
    assert children[1] is root.leaf


def test_modules_excludes_grandchildren_and_self() -> None:
    root = Root()
    children = root.modules()
    assert all(child is not root.mid.inner for child in children)
    assert all(child is not root for child in children)
    mid_children = root.mid.modules()
    assert len(mid_children) == 1
    assert mid_children[0] is root.mid.inner


def test_modules_of_leaf_is_empty() -> None:
    assert list(Leaf(1.0, 2.0).modules()) == []
    assert list(Module().modules()) == []


# -- named_parameters and parameters ----------------------------------------------------


def test_named_parameters_dotted_names_in_documented_order() -> None:
    names = [name for name, _ in Root().named_parameters()]
    assert names == EXPECTED_NAMES


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
    assert [n for n, _ in root.mid.named_parameters()] == ["gamma", "inner.weight", "inner.bias"]
    assert [n for n, _ in root.mid.inner.named_parameters()] == ["weight", "bias"]
    assert [n for n, _ in root.leaf.named_parameters()] == ["weight", "bias"]
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
    assert root.num_parameters() == 7


def test_scalar_parameters_are_trainable() -> None:
    root = Root()
    scalars = [p.value for p in root.parameters() if isinstance(p.value, Scalar)]
    assert len(scalars) == 3
    assert all(s.requires_grad for s in scalars)


# -- add_parameter ----------------------------------------------------------------------


def test_add_parameter_returns_parameter_listed_under_its_name() -> None:
    leaf = Leaf(1.0, 2.0)
    added = leaf.add_parameter("extra", 7.0)
    assert isinstance(added, Parameter)
    assert added.value == 7.0
    named = list(leaf.named_parameters())
    assert [n for n, _ in named] == ["weight", "bias", "extra"]
    assert named[2][1] is added
    assert leaf.extra is added


def test_add_parameter_deep_in_tree_shows_dotted_name() -> None:
    root = Root()
    late = root.mid.inner.add_parameter("late", Scalar(9.0))
    named = dict(root.named_parameters())
    assert named["mid.inner.late"] is late
    names = [n for n, _ in root.named_parameters()]
    assert names == [*EXPECTED_NAMES[:5], "mid.inner.late", *EXPECTED_NAMES[5:]]
    assert late.value.requires_grad


# -- train / eval -----------------------------------------------------------------------


def test_eval_reaches_every_descendant_and_returns_self() -> None:
    root = Root()
    assert root.eval() is root
    assert [m.training for m in all_modules(root)] == [False, False, False, False]
    assert root.mid.inner.training is False


def test_train_reaches_every_descendant_and_returns_self() -> None:
    root = Root()
    root.eval()
    assert root.train() is root
    assert [m.training for m in all_modules(root)] == [True, True, True, True]
    assert root.mid.inner.training is True


def test_train_restores_a_manually_switched_grandchild() -> None:
    root = Root()
    root.mid.inner.training = False
    root.leaf.training = False
    root.train()
    assert root.mid.inner.training is True
    assert root.leaf.training is True


def test_eval_on_subtree_leaves_rest_untouched() -> None:
    root = Root()
    assert root.mid.eval() is root.mid
    assert root.training is True
    assert root.leaf.training is True
    assert root.mid.training is False
    assert root.mid.inner.training is False
    root.mid.train()
    assert [m.training for m in all_modules(root)] == [True, True, True, True]

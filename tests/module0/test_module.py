"""Task 0.3: walking the Module tree (modules, named_parameters, parameters, train/eval).

Most tests use a tree of three levels, with names chosen so that insertion order
differs from alphabetical order::

    Root                 own: zeta, alpha
    ├── mid: Middle      own: gamma   (its child is added *before* gamma)
    │   └── inner: Leaf  own: weight, bias
    └── leaf: Leaf       own: weight, bias

and a tree five modules deep (``Deep``), so that a walk that only reaches children and
grandchildren is caught.

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


class Deep(Module):
    """Level ``level`` (0 to 4) of a tree five modules deep: a child ``sub`` (above the
    bottom), then its own parameter ``w``; level 1 also has a second child ``side``."""

    def __init__(self, level: int = 0) -> None:
        super().__init__()
        if level < 4:
            self.sub = Deep(level + 1)
        self.w = Parameter(Scalar(float(level)))
        if level == 1:
            self.side = Leaf(10.0, 11.0)


DEEP_NAMES = [
    "w",
    "sub.w",
    "sub.sub.w",
    "sub.sub.sub.w",
    "sub.sub.sub.sub.w",
    "sub.side.weight",
    "sub.side.bias",
]


def deep_modules(root: Deep) -> list[Module]:
    """Every module of the deep tree, top to bottom, then the side leaf."""
    chain: list[Module] = [root]
    for _ in range(4):
        chain.append(chain[-1].sub)
    return [*chain, root.sub.side]


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


def test_named_parameters_five_levels_deep_depth_first() -> None:
    root = Deep()
    assert names_of(root) == DEEP_NAMES
    assert [param_value(p) for _, p in root.named_parameters()] == [
        0.0, 1.0, 2.0, 3.0, 4.0, 10.0, 11.0
    ]  # fmt: skip
    assert names_of(root.sub.sub) == ["w", "sub.w", "sub.sub.w"]
    bottom = deep_modules(root)[4]
    late = bottom.add_parameter("late", Scalar(5.0))
    named = {exact_str(n): p for n, p in root.named_parameters()}
    assert named["sub.sub.sub.sub.late"] is late
    params = exact_list(root.parameters(), item=None)
    assert len(params) == 8 and params[5] is late and params[4] is bottom.w


def test_modules_at_depth_are_direct_children_only() -> None:
    root = Deep()
    chain = deep_modules(root)
    for level in range(4):
        children = exact_list(chain[level].modules(), item=None)
        want = [chain[level + 1], root.sub.side] if level == 1 else [chain[level + 1]]
        assert len(children) == len(want)
        assert all(got is expected for got, expected in zip(children, want, strict=True))
    assert exact_list(chain[4].modules(), item=None) == []


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


def test_train_and_eval_reach_five_levels_down() -> None:
    """A walk that stops after children and grandchildren misses levels 3 and 4."""
    root = Deep()
    assert root.eval() is root
    assert [exact_bool(m.training) for m in deep_modules(root)] == [False] * 6
    assert root.train() is root
    assert [exact_bool(m.training) for m in deep_modules(root)] == [True] * 6
    bottom = deep_modules(root)[4]
    bottom.training = False
    root.sub.sub.train()
    assert exact_bool(bottom.training) is True
    assert exact_bool(root.sub.sub.eval().training) is False
    assert exact_bool(bottom.training) is False
    assert exact_bool(root.sub.training) is True


def test_eval_on_subtree_leaves_rest_untouched() -> None:
    root = Root()
    assert root.mid.eval() is root.mid
    assert exact_bool(root.training) is True
    assert exact_bool(root.leaf.training) is True
    assert exact_bool(root.mid.training) is False
    assert exact_bool(root.mid.inner.training) is False
    root.mid.train()
    assert modes(root) == [True, True, True, True]

"""Stage 0: scalar autodiff.

``import module0 as mt`` gives the framework as of this stage: operators, the Module
tree, the autodiff engine, Scalar, optimizers, the scalar network and the datasets.
"""

from module0 import operators
from module0.autodiff import (
    Context,
    Variable,
    backpropagate,
    central_difference,
    no_grad,
    topological_sort,
)
from module0.datasets import DATASETS, Graph, load_dataset
from module0.errors import (
    ForwardTypeError,
    GraphReleasedError,
    MiniTorchError,
    ParameterNameError,
    UnknownDatasetError,
)
from module0.graph import draw_graph
from module0.module import Module, Parameter
from module0.optim import SGD, Adam, Optimizer
from module0.scalar import Scalar, ScalarFunction, derivative_check
from module0.scalar_nn import ScalarLinear, ScalarNetwork

__all__ = [
    "DATASETS",
    "SGD",
    "Adam",
    "Context",
    "ForwardTypeError",
    "Graph",
    "GraphReleasedError",
    "MiniTorchError",
    "Module",
    "Optimizer",
    "Parameter",
    "ParameterNameError",
    "Scalar",
    "ScalarFunction",
    "ScalarLinear",
    "ScalarNetwork",
    "UnknownDatasetError",
    "Variable",
    "backpropagate",
    "central_difference",
    "derivative_check",
    "draw_graph",
    "load_dataset",
    "no_grad",
    "operators",
    "topological_sort",
]

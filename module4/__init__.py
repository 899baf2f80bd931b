"""Stage 4: convolutions, pooling, softmax, dropout, losses and layers.

``import module4 as mt`` gives the whole framework: everything of stages 0 to 3 plus
``conv1d`` / ``conv2d`` (:mod:`module4.fast_conv`), pooling, ``max`` / ``argmax``,
``softmax`` / ``logsoftmax`` and ``dropout`` (:mod:`module4.nn`), the losses
(:mod:`module4.losses`), the layers and state dicts (:mod:`module4.layers`),
``BatchNorm1d`` / ``BatchNorm2d`` (:mod:`module4.batchnorm`) and the two milestone
networks (:mod:`module4.models`). ``Linear`` is now stage 4's, with He or
Xavier initialisation; ``nn.max`` (gradient to one maximal entry, like ``torch.max``)
is not exported by name, so ``from module4 import *`` keeps Python's ``max``.
"""

from module3 import *  # noqa: F403
from module3 import __all__ as _stage3
from module4 import batchnorm, layers, losses, nn
from module4.batchnorm import BatchNorm1d, BatchNorm2d
from module4.fast_conv import conv1d, conv2d
from module4.layers import (
    AvgPool2d,
    Conv1d,
    Conv2d,
    Dropout,
    Embedding,
    Flatten,
    Linear,
    MaxPool2d,
    ReLU,
    Sequential,
    load,
    load_state_dict,
    save,
    state_dict,
)
from module4.losses import binary_cross_entropy, cross_entropy, mse_loss, nll_loss
from module4.models import DigitCNN, SentenceCNN
from module4.nn import argmax, avgpool2d, dropout, logsoftmax, maxpool2d, softmax, tile

__all__ = [
    *(name for name in _stage3 if name != "Linear"),
    "Linear",
    "AvgPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv1d",
    "Conv2d",
    "DigitCNN",
    "Dropout",
    "Embedding",
    "Flatten",
    "MaxPool2d",
    "ReLU",
    "SentenceCNN",
    "Sequential",
    "argmax",
    "avgpool2d",
    "batchnorm",
    "binary_cross_entropy",
    "conv1d",
    "conv2d",
    "cross_entropy",
    "dropout",
    "layers",
    "load",
    "load_state_dict",
    "logsoftmax",
    "losses",
    "maxpool2d",
    "mse_loss",
    "nll_loss",
    "nn",
    "save",
    "softmax",
    "state_dict",
    "tile",
]

"""Task 4.5: the two networks the milestone scripts train.

* :class:`DigitCNN` — two 3×3 convolutions (padding 1, so the size is kept), each
  followed by ReLU and 2×2 max pooling, then dropout, a hidden Linear layer with ReLU,
  and a Linear layer to 10 logits. For 8×8 digits the maps are 8×8 → 4×4 → 2×2; for
  28×28 MNIST 28×28 → 14×14 → 7×7.
* :class:`SentenceCNN` — Kim (2014)'s sentence classifier: word vectors, one 1-D
  convolution per window width (3, 4, 5 words by default) with ReLU, the maximum of
  each filter over the sentence ("max over time": a filter answers "does this n-gram
  pattern occur anywhere?"), dropout, and a Linear layer to the class logits.

  Kim's Linear layer reads the concatenation of the pooled features. There is no
  concatenation op in this framework, and none is needed: a Linear layer over
  ``[h_3, h_4, h_5]`` is ``h_3 @ W_3 + h_4 @ W_4 + h_5 @ W_5 + b`` with ``W`` cut
  into row blocks, so the model keeps one Linear layer per width and adds their outputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from module0.module import Module
from module1.tensor import Tensor
from module1.tensor_data import ShapeError
from module1.tensor_ops import TensorBackend
from module2.fast_ops import FastTensorBackend
from module4 import nn
from module4.batchnorm import BatchNorm2d
from module4.fast_conv import conv2d
from module4.layers import Conv1d, Conv2d, Dropout, Embedding, Flatten, Linear


class Conv2dBN(Conv2d):
    """A Conv2d without bias followed by :class:`~module4.batchnorm.BatchNorm2d` of its
    output channels (``norm``): the normalization subtracts each channel's mean, so a
    bias before it would cancel out (its gradient is zero) and BatchNorm's own ``bias``
    takes its place. ``weight`` keeps its name, so code that reads a conv layer's
    weights reads this one's."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        padding: int = 0,
        rng: np.random.Generator | None = None,
        backend: TensorBackend = FastTensorBackend,
    ) -> None:
        super().__init__(in_channels, out_channels, kernel_size, padding=padding, rng=rng,
                         backend=backend)  # fmt: skip
        del self._parameters["bias"]
        self.norm = BatchNorm2d(out_channels, backend=backend)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(conv2d(x, self.weight.value, self.stride, self.padding))

    def __repr__(self) -> str:
        norm = f"{type(self.norm).__name__}({self.norm.num_features})"  # the summary's width
        return super().__repr__()[:-1] + f", bias=False) + {norm}"


class DigitCNN(Module):
    """A small CNN for ``size``×``size`` grey digits (``size`` divisible by 4):
    ``forward`` maps ``(batch, 1, size, size)`` to ``(batch, classes)`` logits.
    ``batchnorm``: BatchNorm2d after each convolution, before its ReLU."""

    def __init__(
        self,
        size: int = 8,
        channels: tuple[int, int] = (16, 32),
        hidden: int = 64,
        classes: int = 10,
        dropout: float = 0.25,
        seed: int = 0,
        backend: TensorBackend = FastTensorBackend,
        batchnorm: bool = False,
    ) -> None:
        super().__init__()
        if size < 4 or size % 4:
            raise ValueError(f"DigitCNN needs an image size divisible by 4, got {size}")
        rng = np.random.default_rng(seed)
        c1, c2 = channels
        self.size = size
        conv = Conv2dBN if batchnorm else Conv2d
        self.conv1 = conv(1, c1, 3, padding=1, rng=rng, backend=backend)
        self.conv2 = conv(c1, c2, 3, padding=1, rng=rng, backend=backend)
        self.batchnorm = batchnorm
        self.flatten = Flatten()
        self.dropout = Dropout(dropout, seed=seed)
        self.hidden = Linear(c2 * (size // 4) ** 2, hidden, rng=rng, backend=backend)
        self.out = Linear(hidden, classes, init="xavier", rng=rng, backend=backend)

    def forward(self, x: Tensor) -> Tensor:
        if x.dims != 4 or x.shape[1:] != (1, self.size, self.size):
            raise ShapeError(
                f"DigitCNN(size={self.size}) needs input of shape (batch, 1, {self.size}, "
                f"{self.size}), got {x.shape}"
            )
        # BEGIN SOLUTION 4.5
        h = nn.maxpool2d(self.conv1(x).relu(), (2, 2))
        h = nn.maxpool2d(self.conv2(h).relu(), (2, 2))
        h = self.dropout(self.flatten(h))
        return self.out(self.hidden(h).relu())
        # END SOLUTION


class SentenceCNN(Module):
    """Kim-style CNN: ``forward`` maps token ids ``(batch, length)`` (an integer NumPy
    array, 0 = padding) to ``(batch, classes)`` logits. ``embeddings`` (e.g. GloVe rows
    for the vocabulary) replaces the random start; ``freeze`` keeps it fixed."""

    def __init__(
        self,
        vocab_size: int,
        dim: int = 32,
        widths: Sequence[int] = (3, 4, 5),
        filters: int = 32,
        classes: int = 2,
        dropout: float = 0.5,
        embeddings: npt.NDArray[np.float64] | None = None,
        freeze: bool = False,
        seed: int = 0,
        backend: TensorBackend = FastTensorBackend,
    ) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        self.widths = tuple(widths)
        self.embedding = Embedding(vocab_size, dim, embeddings, freeze, rng, backend)
        self.convs = [Conv1d(dim, filters, w, rng=rng, backend=backend) for w in self.widths]
        self.heads = [
            Linear(filters, classes, init="xavier", rng=rng, backend=backend) for _ in self.widths
        ]
        for w, conv, head in zip(self.widths, self.convs, self.heads, strict=True):
            setattr(self, f"conv{w}", conv)
            setattr(self, f"head{w}", head)
        self.dropout = Dropout(dropout, seed=seed)

    def forward(self, tokens: npt.NDArray[np.int64]) -> Tensor:
        tokens = np.asarray(tokens)
        if tokens.ndim != 2 or tokens.shape[1] < max(self.widths):
            raise ShapeError(
                f"SentenceCNN needs token ids of shape (batch, length >= {max(self.widths)}), "
                f"got {tokens.shape}"
            )
        # BEGIN SOLUTION 4.5
        x = self.embedding(tokens).permute(0, 2, 1).contiguous()  # (batch, dim, length)
        logits: Tensor | None = None
        for conv, head in zip(self.convs, self.heads, strict=True):
            pooled = nn.max(conv(x).relu(), 2)  # (batch, filters): max over time
            part = head(self.dropout(pooled))
            logits = part if logits is None else logits + part
        assert logits is not None
        return logits
        # END SOLUTION

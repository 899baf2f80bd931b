"""Stage 5: the transformer. LayerNorm and GELU with their own backward, a masked
softmax and scaled dot-product attention (:mod:`module5.functional`), multi-head attention and a
GPT with KV-cache generation (:mod:`module5.gpt`), AdamW, gradient clipping and a
cosine schedule (:mod:`module5.optim`), a character tokenizer and a batch sampler
(:mod:`module5.text`), and recurrent networks: RNN, LSTM and GRU cells and sequence
modules with PyTorch's gate order and shapes (:mod:`module5.rnn`).

``import module5 as mt`` gives the whole framework: everything of stages 0 to 4 plus
these names.
"""

from module4 import *  # noqa: F403
from module4 import __all__ as _stage4
from module5 import functional, gpt, optim, rnn, text
from module5.functional import (
    causal_mask,
    gelu,
    layer_norm,
    masked_softmax,
    scaled_dot_product_attention,
)
from module5.gpt import GELU, GPT, Block, GPTConfig, KVCache, LayerNorm, MultiHeadAttention
from module5.losses import lm_cross_entropy
from module5.optim import AdamW, clip_grad_norm_, cosine_lr, decay_groups
from module5.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell, detach_state
from module5.text import CharTokenizer, get_batch

__all__ = [
    *_stage4,
    "GELU",
    "GPT",
    "GRU",
    "GRUCell",
    "LSTM",
    "LSTMCell",
    "RNN",
    "RNNCell",
    "AdamW",
    "Block",
    "CharTokenizer",
    "GPTConfig",
    "KVCache",
    "LayerNorm",
    "MultiHeadAttention",
    "causal_mask",
    "clip_grad_norm_",
    "cosine_lr",
    "decay_groups",
    "detach_state",
    "gelu",
    "get_batch",
    "gpt",
    "layer_norm",
    "lm_cross_entropy",
    "masked_softmax",
    "functional",
    "optim",
    "rnn",
    "scaled_dot_product_attention",
    "text",
]

"""Training tools for the GPT: AdamW with parameter groups, clipping by the global
gradient norm, and a warmup + cosine learning-rate schedule."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from module0.module import Module, Parameter
from module2.fast_optim import FastAdam, _prepare, _state, adam_update

# BEGIN SOLUTION 5.4 omit
try:  # the reference's fast paths for clipping and AdamW (module5/fast_optim.py)
    from module5 import fast_optim
except ModuleNotFoundError:  # a tree with the reference's optim but not its fast paths
    fast_optim = None  # type: ignore[assignment]
# END SOLUTION


class AdamW(FastAdam):
    r"""Adam with decoupled weight decay (Loshchilov & Hutter, 2019), in place.

    Each step first shrinks a decayed parameter, :math:`p \leftarrow p (1 - lr\,\lambda)`,
    then takes stage 2's fused Adam step, as ``torch.optim.AdamW`` does. ``params`` is a
    list of Parameters (all decayed by ``weight_decay``) or of groups
    ``{"params": [...], "weight_decay": w}`` (a group without the key takes
    ``weight_decay``). :func:`decay_groups` makes the usual two groups.
    """

    def __init__(
        self,
        params: Iterable[Parameter] | Sequence[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ) -> None:
        items = list(params)
        groups = items if items and isinstance(items[0], dict) else [{"params": items}]
        flat: list[Parameter] = []
        decays: list[float] = []
        for i, group in enumerate(groups):
            if not isinstance(group, dict) or "params" not in group:
                raise TypeError(f"AdamW: group {i} must be a dict with 'params'")
            members = list(group["params"])
            flat += members
            decays += [float(group.get("weight_decay", weight_decay))] * len(members)
        if weight_decay < 0 or any(w < 0 for w in decays):
            raise ValueError(f"AdamW: weight decay must be at least 0, got {decays}")
        super().__init__(flat, lr, betas, eps)
        self.weight_decays = decays

    def step(self) -> None:
        """Decay, then the fused Adam step, for every parameter that has a gradient."""
        # BEGIN SOLUTION 5.4 omit
        if fast_optim is not None:  # decay and step in one pass
            fast_optim.adamw_step(self)
            return
        # END SOLUTION
        # BEGIN SOLUTION 5.4
        beta1, beta2 = self.betas
        for i, p, param, grad in _prepare(self.parameters, self._checked):
            if self.weight_decays[i]:
                param *= 1.0 - self.lr * self.weight_decays[i]
            m, _ = _state(self.first_moment, i, p, param.size, "first moment")
            v, _ = _state(self.second_moment, i, p, param.size, "second moment")
            self.steps[i] += 1
            adam_update(param, grad, m, v, self.lr, beta1, beta2, self.eps, self.steps[i])
        # END SOLUTION


def decay_groups(model: Module, weight_decay: float) -> list[dict[str, Any]]:
    """Two AdamW groups: the matrices of the linear layers decayed, everything else
    (biases, LayerNorm weights, embeddings, which the tied head shares) not."""
    decay: list[Parameter] = []
    keep: list[Parameter] = []
    for name, p in model.named_parameters():
        *path, leaf = name.split(".")
        is_matrix = len(p.value.shape) == 2 and leaf == "weight"
        embedding = bool(path) and path[-1] in ("wte", "wpe")  # also inside a wrapper
        (decay if is_matrix and not embedding else keep).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": keep, "weight_decay": 0.0}]


def clip_grad_norm_(parameters: Iterable[Parameter], max_norm: float) -> float:
    """Scale every gradient by ``max_norm / (total + 1e-6)`` when their global L2 norm
    ``total`` is above ``max_norm``, in place (``max_norm = 0`` zeroes them, as PyTorch);
    return ``total`` (before clipping). Gradients that are views (not contiguous) are
    scaled too."""
    if not max_norm >= 0.0:
        raise ValueError(f"clip_grad_norm_: max_norm must be at least 0, got {max_norm}")
    # BEGIN SOLUTION 5.4
    grads = [p.value.grad for p in parameters if p.value.grad is not None]
    total = _global_norm(grads)
    if total > max_norm:
        scale = max_norm / (total + 1e-6)
        for g in grads:
            data = g._tensor
            if data.is_contiguous() and data._storage.size == data.size:
                data._storage *= scale
            else:
                g._tensor = (g * scale)._tensor
    return total
    # END SOLUTION


# BEGIN SOLUTION 5.4 omit
def _global_norm(grads: list[Any]) -> float:
    """The L2 norm of all of ``grads`` (Tensors) together: one compiled pass per gradient
    (``module5/fast_optim.py``), or NumPy's float64 squares where that file is absent."""
    if fast_optim is not None:
        return fast_optim.global_norm(grads)
    return math.sqrt(sum(float(np.square(g.numpy(), dtype=np.float64).sum()) for g in grads))


# END SOLUTION


def cosine_lr(step: int, lr: float, warmup: int, total: int, min_lr: float = 0.0) -> float:
    """The learning rate at ``step`` (from 0): linear from ``lr / warmup`` to ``lr`` over
    ``warmup`` steps, then half a cosine down to ``min_lr`` at ``total``, ``min_lr`` after."""
    # BEGIN SOLUTION 5.4
    if step < warmup:
        return lr * (step + 1) / warmup
    if step >= total:
        return min_lr
    progress = (step - warmup) / max(1, total - warmup)
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * progress))
    # END SOLUTION

"""Graded checks of stage 5 (see ``autograder/checks.py``): each calls the student's code
on inputs drawn from ``rng`` and returns what came back; the grader compares that with
what the reference returns for the same inputs, outside the student's process.

Tensors run on a twin of ``SimpleBackend`` (as stage 4's checks: its kernels compile
nothing, and a constant made on another backend shows), in float64 and float32, some of
them non-contiguous. Task 5.3's model runs with stand-ins for task 5.1's and 5.2's
functions (compositions of stage-1 tensor operations, stage 4's ``_Patched``), so it is graded
on its own code. Random draws follow the README's contracts (``get_batch`` draws its
starts with one ``rng.integers`` call), so the answers are deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from autograder.checks import check, raised

Array = np.ndarray
DTYPES = (np.float64, np.float32)


def _simple() -> Any:
    """Stage 4's twin of ``SimpleBackend`` (its kernels, another identity)."""
    from tests.module4.checks import _simple as simple

    return simple()


def _make(values: Array, order: Sequence[int] | None = None, grad: bool = False,
          dtype: Any = np.float64) -> Any:  # fmt: skip
    """A tensor of ``values`` on :func:`_simple` whose storage holds them permuted by
    ``order`` (stage 4's helper)."""
    from tests.module4.checks import _make as make

    return make(values, _simple(), order, grad, dtype)


def _constant(values: Array, dtype: Any = np.float64) -> Any:
    from module1.tensor import from_numpy

    return from_numpy(np.asarray(values, dtype=dtype), _simple())


def _order(rng: np.random.Generator, ndim: int) -> tuple[int, ...]:
    return tuple(int(i) for i in rng.permutation(ndim))


def _grad(t: Any) -> Array | None:
    return None if t.grad is None else t.grad.to_numpy()


# =========================================================================================
# Task 5.1: LayerNorm and GELU
# =========================================================================================


def _ln_cases(rng: np.random.Generator) -> list[dict[str, Any]]:
    cases = []
    for i in range(8):
        ndim = int(rng.integers(1, 4))
        shape = (*(int(s) for s in rng.integers(1, 5, ndim - 1)), int(rng.integers(2, 9)))
        scale = 1.0 if i % 4 else 0.1
        mean = 0.0 if i % 4 else float(rng.choice([100.0, 1e4]))  # a large mean every 4th
        x = mean + scale * rng.normal(size=shape)
        cases.append({"x": x, "w": rng.normal(size=shape[-1]), "b": rng.normal(size=shape[-1]),
                      "eps": float(rng.choice([1e-5, 1e-3])), "order": _order(rng, ndim),
                      "dtype": DTYPES[i % 2]})  # fmt: skip
    return cases


@check("5.1", rtol=2e-5, atol=2e-5)
def layer_norm(rng: np.random.Generator) -> Any:
    """Values over any shape, both dtypes, non-contiguous inputs, rows with a large mean."""
    from module5.functional import layer_norm as fn

    out = []
    for c in _ln_cases(rng):
        d = c["dtype"]
        out.append(raised(lambda c=c, d=d: fn(
            _make(c["x"], c["order"], dtype=d), _constant(c["w"], d), _constant(c["b"], d), c["eps"]
        ).to_numpy()))  # fmt: skip
    return out


@check("5.1", "layer_norm.backward", rtol=1e-4, atol=1e-4)
def layer_norm_backward(rng: np.random.Generator) -> Any:
    """The gradients of ``sum(layer_norm(x, w, b) * g)`` for ``x``, ``w`` and ``b``."""
    from module5.functional import layer_norm as fn

    out = []
    for c in _ln_cases(rng):
        d = c["dtype"]
        g = rng.normal(size=c["x"].shape)

        def run(c: dict[str, Any] = c, d: Any = d, g: Array = g) -> Any:
            x = _make(c["x"], c["order"], grad=True, dtype=d)
            w, b = _make(c["w"], grad=True, dtype=d), _make(c["b"], grad=True, dtype=d)
            (fn(x, w, b, c["eps"]) * _constant(g, d)).sum().backward()
            return [_grad(x), _grad(w), _grad(b)]

        out.append(raised(run))
    return out


def _gelu_inputs(rng: np.random.Generator) -> list[tuple[Array, tuple[int, ...], Any]]:
    cases = []
    for i in range(4):
        shape = tuple(int(s) for s in rng.integers(1, 6, 2))
        x = rng.normal(scale=float(rng.choice([0.5, 2.0, 6.0])), size=shape)
        cases.append((x, _order(rng, 2), DTYPES[i % 2]))
    cases.append((np.array([[0.0, -30.0, 30.0, -3.0]]), (0, 1), np.float64))
    return cases


@check("5.1", rtol=2e-5, atol=1e-6)
def gelu(rng: np.random.Generator) -> Any:
    from module5.functional import gelu as fn

    return [raised(lambda x=x, o=o, d=d: fn(_make(x, o, dtype=d)).to_numpy())
            for x, o, d in _gelu_inputs(rng)]  # fmt: skip


@check("5.1", "gelu.backward", rtol=1e-4, atol=1e-5)
def gelu_backward(rng: np.random.Generator) -> Any:
    from module5.functional import gelu as fn

    out = []
    for x, o, d in _gelu_inputs(rng):
        g = rng.normal(size=x.shape)

        def run(x: Array = x, o: Any = o, d: Any = d, g: Array = g) -> Any:
            leaf = _make(x, o, grad=True, dtype=d)
            (fn(leaf) * _constant(g, d)).sum().backward()
            return _grad(leaf)

        out.append(raised(run))
    return out


# =========================================================================================
# Task 5.2: masked softmax and attention
# =========================================================================================


def _softmax_cases(rng: np.random.Generator) -> list[dict[str, Any]]:
    """Six small cases (one with a row that keeps nothing, one with no mask), then
    scores of +-1000 with and without a mask in both dtypes (nothing may overflow), and
    NaN and infinities at masked positions (they must not reach the kept entries)."""
    cases = []
    for i in range(10):
        rows, cols = int(rng.integers(1, 5)), int(rng.integers(2, 7))
        keep = rng.random((rows, cols)) < 0.6
        keep[:, int(rng.integers(cols))] = True
        if i == 0:
            keep[0] = False  # a row with nothing kept
        scale = float(rng.choice([1.0, 30.0])) if i < 6 else 1000.0
        x = rng.normal(scale=scale, size=(rows, cols))
        if i >= 8:  # what a masked position holds must not matter
            x[~keep] = rng.choice([np.nan, np.inf, -np.inf], int((~keep).sum()))
        cases.append({"x": x, "keep": None if i in (5, 6, 7) else keep,
                      "dtype": DTYPES[i % 2], "order": _order(rng, 2)})  # fmt: skip
    return cases


@check("5.2", rtol=2e-5, atol=1e-7)
def masked_softmax(rng: np.random.Generator) -> Any:
    """Values (masked entries exactly 0, a row that keeps nothing all 0)."""
    from module5.functional import masked_softmax as fn

    return [
        raised(lambda c=c: fn(_make(c["x"], c["order"], dtype=c["dtype"]), c["keep"]).to_numpy())
        for c in _softmax_cases(rng)
    ]


@check("5.2", "masked_softmax.backward", rtol=1e-4, atol=1e-6)
def masked_softmax_backward(rng: np.random.Generator) -> Any:
    from module5.functional import masked_softmax as fn

    out = []
    for c in _softmax_cases(rng):
        g = rng.normal(size=c["x"].shape)

        def run(c: dict[str, Any] = c, g: Array = g) -> Any:
            leaf = _make(c["x"], c["order"], grad=True, dtype=c["dtype"])
            (fn(leaf, c["keep"]) * _constant(g, c["dtype"])).sum().backward()
            return _grad(leaf)

        out.append(raised(run))
    return out


def _attention_cases(rng: np.random.Generator) -> list[dict[str, Any]]:
    cases = []
    for i in range(6):
        lead = tuple(int(s) for s in rng.integers(1, 3, int(rng.integers(0, 3))))
        t = int(rng.integers(1, 5))
        s = t + int(rng.integers(0, 3))
        d, dv = int(rng.integers(1, 5)), int(rng.integers(1, 4))
        mask = (rng.random((t, s)) < 0.8) if i in (4, 5) else None
        if i == 5:  # with causal=True: padding keys off (keep where both allow)
            mask = np.broadcast_to(rng.random(s) < 0.7, (t, s)).copy()
        cases.append({"q": rng.normal(size=(*lead, t, d)), "k": rng.normal(size=(*lead, s, d)),
                      "v": rng.normal(size=(*lead, s, dv)), "causal": bool(i % 2),
                      "mask": mask, "dtype": DTYPES[(i // 2) % 2]})  # fmt: skip
    return cases


@check("5.2", rtol=5e-5, atol=1e-6)
def attention(rng: np.random.Generator) -> Any:
    """Values over batch and head dimensions, causal (with a cache: S > T) or not, with a
    mask."""
    from module5.functional import scaled_dot_product_attention as fn

    out = []
    for c in _attention_cases(rng):
        d = c["dtype"]
        out.append(raised(lambda c=c, d=d: fn(
            _make(c["q"], dtype=d), _make(c["k"], dtype=d), _make(c["v"], dtype=d),
            causal=c["causal"], mask=c["mask"],
        ).to_numpy()))  # fmt: skip
    return out


@check("5.2", "attention.backward", rtol=2e-4, atol=1e-5)
def attention_backward(rng: np.random.Generator) -> Any:
    from module5.functional import scaled_dot_product_attention as fn

    out = []
    for c in _attention_cases(rng):
        d = c["dtype"]
        g = rng.normal(size=(*c["q"].shape[:-1], c["v"].shape[-1]))

        def run(c: dict[str, Any] = c, d: Any = d, g: Array = g) -> Any:
            q, k, v = (_make(c[n], grad=True, dtype=d) for n in ("q", "k", "v"))
            y = fn(q, k, v, causal=c["causal"], mask=c["mask"])
            (y * _constant(g, d)).sum().backward()
            return [_grad(q), _grad(k), _grad(v)]

        out.append(raised(run))
    return out


# =========================================================================================
# Task 5.3: multi-head attention and the GPT (on stand-ins for 5.1 and 5.2)
# =========================================================================================


def _standin_layer_norm(x: Any, w: Any, b: Any, eps: float = 1e-5) -> Any:
    n = x.shape[-1]
    centred = x - x.sum(-1, keepdim=True) * (1.0 / n)
    var = (centred * centred).sum(-1, keepdim=True) * (1.0 / n)
    return centred * ((var + eps) ** -0.5) * w + b


def _standin_gelu(x: Any) -> Any:
    u = (x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)
    return x * (u.tanh() + 1.0) * 0.5


def _standin_attention(q: Any, k: Any, v: Any, causal: bool = False, mask: Any = None,
                       dropout: float = 0.0, rng: Any = None) -> Any:  # fmt: skip
    from module1.tensor import from_numpy

    t, s = q.shape[-2], k.shape[-2]
    keep = np.tril(np.ones((t, s), dtype=bool), k=s - t) if causal else np.ones((t, s), bool)
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    on = from_numpy(keep.astype(q.dtype), q.backend)
    off = from_numpy(np.where(keep, 0.0, -1e30).astype(q.dtype), q.backend)
    filled = scores * on + off
    e = (filled - filled.detach().max(-1, keepdim=True)).exp() * on
    return (e / e.sum(-1, keepdim=True)) @ v


def _standins() -> Any:
    """Stage 4's ``_Patched``: the stand-ins in ``module5.gpt`` while a check runs."""
    import module5.gpt as gpt
    from tests.module4.checks import _Patched

    return _Patched([(gpt, "layer_norm", _standin_layer_norm), (gpt, "gelu", _standin_gelu),
                     (gpt, "scaled_dot_product_attention", _standin_attention)])  # fmt: skip


def _gpt_cases(rng: np.random.Generator) -> list[dict[str, Any]]:
    cases = []
    for i in range(3):
        heads = int(rng.integers(1, 3))
        config = {"vocab_size": int(rng.integers(3, 9)), "block_size": 6,
                  "n_layer": int(rng.integers(1, 3)), "n_head": heads,
                  "n_embd": 4 * heads}  # fmt: skip
        b, t = int(rng.integers(1, 3)), int(rng.integers(2, 7))
        cases.append({"config": config, "seed": int(rng.integers(1000)), "dtype": DTYPES[i % 2],
                      "tokens": rng.integers(0, config["vocab_size"], (b, t))})  # fmt: skip
    return cases


def randomize(module: Any, seed: int) -> dict[str, Array]:
    """Draw every parameter of ``module`` afresh (LayerNorm weights around 1, the rest
    around 0, all distinct: a block wired another way then gives other logits), keeping
    its dtype and backend; return the values by name (float64). The local tests
    (``test_gpt.py``) draw with it too."""
    from module1.tensor import from_numpy

    rng = np.random.default_rng(seed)
    values = {}
    for name, p in module.named_parameters():
        shape, dtype = p.value.shape, p.value.dtype
        centre = 1.0 if name.endswith("weight") and len(shape) == 1 else 0.0
        v = (centre + rng.normal(scale=0.4, size=shape)).astype(dtype)
        p.update(from_numpy(v, p.value.backend))
        values[name] = v.astype(np.float64)
    return values


def _model(c: dict[str, Any]) -> Any:
    """A model of the case's size with every parameter drawn afresh from its seed."""
    from module5.gpt import GPT, GPTConfig

    model = GPT(GPTConfig(**c["config"]), seed=c["seed"], backend=_simple())
    model.to(c["dtype"])
    randomize(model, c["seed"])
    return model


@check("5.3", rtol=1e-4, atol=1e-6)
def gpt_logits(rng: np.random.Generator) -> Any:
    """The logits of small models (given weights), and a multi-head attention alone."""
    out = []
    with _standins():
        for c in _gpt_cases(rng):
            out.append(raised(lambda c=c: _model(c)(c["tokens"]).to_numpy()))
        x = rng.normal(size=(2, 3, 8))

        def mha() -> Any:
            from module5.gpt import MultiHeadAttention

            layer = MultiHeadAttention(8, 2, rng=np.random.default_rng(4), backend=_simple())
            return layer(_make(x)).to_numpy()

        out.append(raised(mha))
    return out


@check("5.3", "gpt.backward", rtol=5e-4, atol=1e-6)
def gpt_backward(rng: np.random.Generator) -> Any:
    """Gradients of a weighted sum of the logits for every parameter."""
    out = []
    with _standins():
        for c in _gpt_cases(rng):
            g = rng.normal(size=(*c["tokens"].shape, c["config"]["vocab_size"]))

            def run(c: dict[str, Any] = c, g: Array = g) -> Any:
                model = _model(c)
                (model(c["tokens"]) * _constant(g, c["dtype"])).sum().backward()
                return {name: _grad(p.value) for name, p in model.named_parameters()}

            out.append(raised(run))
    return out


@check("5.3", rtol=1e-4, atol=1e-6)
def kv_cache(rng: np.random.Generator) -> Any:
    """Logits decoded with a KV cache a position at a time (the first chunk longer), and
    in chunks of several positions (which show the order of the cached keys)."""
    from module5.gpt import KVCache

    out = []
    with _standins():
        for c in _gpt_cases(rng):
            cuts = sorted({int(a) for a in rng.integers(1, c["tokens"].shape[1], 2)})

            def run(c: dict[str, Any] = c, cuts: list[int] = cuts) -> Any:
                model, tokens = _model(c), c["tokens"]
                cache = KVCache()
                parts = [model(tokens[:, :2], cache).to_numpy()]
                for i in range(2, tokens.shape[1]):
                    parts.append(model(tokens[:, i : i + 1], cache).to_numpy())
                chunked, cache = [], KVCache()
                for a, b in zip([0, *cuts], [*cuts, tokens.shape[1]], strict=True):
                    chunked.append(model(tokens[:, a:b], cache).to_numpy())
                return [np.concatenate(parts, axis=1), np.concatenate(chunked, axis=1),
                        cache.length]  # fmt: skip

            out.append(raised(run))
    return out


@check("5.3")
def generate(rng: np.random.Generator) -> Any:
    """Tokens sampled at a tiny temperature (greedy decoding: ``logits / T``) and at
    ``top_k = 1``, with the cache and without."""
    out = []
    with _standins():
        for c in _gpt_cases(rng)[:2]:
            seed = int(rng.integers(2**31))

            def run(c: dict[str, Any] = c, seed: int = seed) -> Any:
                model, context = _model(c), c["tokens"][:, :2]
                cold = model.generate(context, 5, temperature=1e-4, seed=seed)
                top = model.generate(context, 5, top_k=1, seed=seed, use_cache=False)
                return [cold.tolist(), top.tolist()]

            out.append(raised(run))
    return out


# =========================================================================================
# Task 5.4: training tools and text
# =========================================================================================


@check("5.4", rtol=1e-5, atol=1e-8)
def adamw(rng: np.random.Generator) -> Any:
    """Three steps on two groups (one not decayed), in both dtypes."""
    from module0.module import Parameter
    from module1.tensor import from_numpy
    from module5.optim import AdamW

    out = []
    for d in DTYPES:
        starts = [rng.normal(size=(3, 4)), rng.normal(size=5)]
        grads = [[rng.normal(size=s.shape) for _ in range(3)] for s in starts]
        lr, wd = float(rng.uniform(0.01, 0.2)), float(rng.uniform(0.0, 0.5))

        def run(d: Any = d, starts: list[Array] = starts, grads: list[list[Array]] = grads,
                lr: float = lr, wd: float = wd) -> Any:  # fmt: skip
            params = [Parameter(from_numpy(s.astype(d), _simple(), requires_grad=True))
                      for s in starts]  # fmt: skip
            opt = AdamW([{"params": [params[0]]}, {"params": [params[1]], "weight_decay": 0.0}],
                        lr=lr, betas=(0.85, 0.97), eps=1e-7, weight_decay=wd)  # fmt: skip
            for step in range(3):
                for p, g in zip(params, grads, strict=True):
                    p.value.grad = from_numpy(g[step].astype(d), _simple())
                opt.step()
            return [p.value.to_numpy() for p in params]

        out.append(raised(run))
    return out


@check("5.4", rtol=1e-6, atol=1e-9)
def clip_grad_norm(rng: np.random.Generator) -> Any:
    """The norm returned and the gradients after, above and below the bar."""
    from module0.module import Parameter
    from module1.tensor import from_numpy
    from module5.optim import clip_grad_norm_

    out = []
    for max_norm in (0.5, 1e6, 0.0):
        gs = [rng.normal(size=(2, 3)), rng.normal(size=4), rng.normal(size=(3, 2))]

        def run(gs: list[Array] = gs, max_norm: float = max_norm) -> Any:
            params = [Parameter(from_numpy(np.zeros(g.shape), _simple(), requires_grad=True))
                      for g in gs]  # fmt: skip
            for p, g in zip(params, gs, strict=True):
                p.value.grad = from_numpy(g, _simple())
            params[2].value.grad = from_numpy(gs[2].T.copy(), _simple()).permute(1, 0)  # a view
            total = clip_grad_norm_(params, max_norm)
            return [float(total), *(p.value.grad.to_numpy() for p in params)]

        out.append(raised(run))
    return out


@check("5.4", rtol=1e-9, atol=1e-12)
def cosine_lr(rng: np.random.Generator) -> Any:
    from module5.optim import cosine_lr as fn

    warmup, total = int(rng.integers(1, 20)), int(rng.integers(30, 200))
    lr, floor = float(rng.uniform(0.1, 1.0)), float(rng.uniform(0.0, 0.05))
    steps = [0, warmup - 1, warmup, (warmup + total) // 2, total - 1, total, total + 7]
    steps += [int(s) for s in rng.integers(0, total + 10, 6)]
    return [raised(lambda s=s: float(fn(s, lr, warmup, total, floor))) for s in steps]


@check("5.4")
def tokenizer(rng: np.random.Generator) -> Any:
    """Encode and decode over a random alphabet; an unknown character and token."""
    from module5.text import CharTokenizer

    alphabet = "".join(rng.choice(list("abcdefgXYZ .,;:!?\n'"), 12, replace=False))
    text = "".join(rng.choice(list(alphabet), 40))
    tok = CharTokenizer(alphabet)
    return [raised(lambda: tok.encode(text).tolist()),
            raised(lambda: tok.decode(tok.encode(text))),
            raised(lambda: tok.decode(rng.integers(0, tok.vocab_size, 25)) ),
            raised(lambda: tok.encode(text + "@")),
            raised(lambda: tok.decode([0, tok.vocab_size]))]  # fmt: skip


@check("5.4")
def get_batch(rng: np.random.Generator) -> Any:
    """Windows drawn with one ``rng.integers`` call (the README's contract)."""
    from module5.text import get_batch as fn

    data = rng.integers(0, 50, int(rng.integers(20, 60)))
    out = []
    for batch, block in ((4, 5), (1, 3), (3, 8), (40, len(data) - 2)):  # the last: 2 starts
        seed = int(rng.integers(2**31))
        out.append(raised(lambda b=batch, k=block, s=seed: [
            a.tolist() for a in fn(data, b, k, np.random.default_rng(s))]))  # fmt: skip
    return out


# =========================================================================================
# Task 5.5: the fused kernels (called directly, on NumPy arrays)
# =========================================================================================

_FUSED_SHAPES = ((1, 1), (3, 7), (5, 64), (9, 513), (65, 520))
"""A row of one, rows around 512 entries (a chunk of a vectorized ``exp``), and an input
past 2^15 entries (where a kernel may go parallel) with rows past a block of 64."""


def _fused_case(rng: np.random.Generator, shape: tuple[int, int], i: int) -> tuple[Array, Any]:
    dtype = DTYPES[i % 2]
    return rng.normal(scale=float(rng.choice([0.5, 3.0])), size=shape).astype(dtype), dtype


@check("5.5", rtol=1e-5, atol=1e-6, signed_zeros=True)
def softmax_rows(rng: np.random.Generator) -> Any:
    """Rows with no mask, a causal mask (``period``, ``shift``), a row holding a NaN;
    masked entries exactly +0."""
    from module5.fused import softmax_rows as kernel

    out = []
    for i, shape in enumerate(_FUSED_SHAPES):
        x, _ = _fused_case(rng, shape, i)
        if i == 1:
            x[1, 2] = np.nan
        rows, n = shape
        for period, shift in ((1, n - 1), (min(rows, n), n - min(rows, n))):
            y = np.full_like(x, 7.0)
            out.append(raised(lambda x=x, y=y, p=period, s=shift: (kernel(x, y, p, s), y)[1]))
    return out


@check("5.5", rtol=1e-5, atol=1e-6)
def softmax_rows_backward(rng: np.random.Generator) -> Any:
    """``y * (dy - sum(y * dy))`` row by row, ``y`` a causal softmax (zeros included)."""
    from module5.fused import softmax_rows_backward as kernel

    out = []
    for i, shape in enumerate(_FUSED_SHAPES):
        x, dtype = _fused_case(rng, shape, i)
        e = np.exp(x - x.max(-1, keepdims=True)) * np.tri(*shape, dtype=dtype)
        y = (e / e.sum(-1, keepdims=True)).astype(dtype)
        dy = rng.normal(size=shape).astype(dtype)
        dx = np.full_like(x, 7.0)
        out.append(raised(lambda y=y, dy=dy, dx=dx: (kernel(y, dy, dx), dx)[1]))
    return out


@check("5.5", rtol=2e-5, atol=2e-5)
def layer_norm_rows(rng: np.random.Generator) -> Any:
    """The output, and each row's mean and ``rstd``; rows with a mean of 1e4."""
    from module5.fused import layer_norm_rows as kernel

    out = []
    for i, shape in enumerate(_FUSED_SHAPES[1:]):
        x, dtype = _fused_case(rng, shape, i)
        x = (x + (1e4 if i % 2 else 0.0)).astype(dtype)
        w, b = rng.normal(size=shape[1]).astype(dtype), rng.normal(size=shape[1]).astype(dtype)

        def run(x: Array = x, w: Array = w, b: Array = b) -> Any:
            y, m, s = np.full_like(x, 7.0), np.empty(len(x)), np.empty(len(x))
            kernel(x, w, b, 1e-5, y, m, s)
            return [y, m, s]

        out.append(raised(run))
    return out


@check("5.5", rtol=1e-4, atol=1e-4)
def layer_norm_rows_backward(rng: np.random.Generator) -> Any:
    """``dx``, ``dweight`` and ``dbias`` from the input and its saved statistics."""
    from module5.fused import layer_norm_rows_backward as kernel

    out = []
    for i, shape in enumerate(_FUSED_SHAPES[1:]):
        x, dtype = _fused_case(rng, shape, i)
        w = rng.normal(size=shape[1]).astype(dtype)
        m = x.astype(np.float64).mean(-1)
        s = 1 / np.sqrt(((x - m[:, None]) ** 2).mean(-1) + 1e-5)
        d = rng.normal(size=shape).astype(dtype)

        def run(x: Array = x, w: Array = w, m: Array = m, s: Array = s, d: Array = d) -> Any:
            dx, dw, db = np.full_like(x, 7.0), np.full(x.shape[1], 7.0), np.full(x.shape[1], 7.0)
            kernel(d, x, w, m, s, dx, dw, db)
            return [dx, dw, db]

        out.append(raised(run))
    # Many rows, few columns, eight runs (the local test's race case): rows added into
    # one entry from two threads lose updates in some runs.
    x = rng.normal(size=(1 << 17, 4))
    m = x.mean(-1)
    s = 1 / np.sqrt(((x - m[:, None]) ** 2).mean(-1) + 1e-5)
    w, d = rng.normal(size=4), rng.normal(size=x.shape)

    def runs() -> Any:
        sums = []
        for _ in range(8):
            dx, dw, db = np.empty_like(x), np.full(4, 7.0), np.full(4, 7.0)
            kernel(d, x, w, m, s, dx, dw, db)
            sums.append([dw, db])
        return sums

    out.append(raised(runs))
    return out


@check("5.5", rtol=1e-5, atol=1e-5)
def gelu_kernels(rng: np.random.Generator) -> Any:
    """GELU and its backward over flat arrays across 512-entry chunks, the tails included."""
    from module5.fused import gelu_backward, gelu_forward

    out = []
    for i, n in enumerate((1, 511, 513, 40_000)):
        x = rng.normal(scale=4.0, size=n).astype(DTYPES[i % 2])
        x[: min(n, 3)] = np.array([-30.0, 30.0, 0.0])[: min(n, 3)]
        d = rng.normal(size=n).astype(x.dtype)

        def run(x: Array = x, d: Array = d) -> Any:
            y, dx = np.full_like(x, 7.0), np.full_like(x, 7.0)
            gelu_forward(x, y)
            gelu_backward(x, d, dx)
            return [y, dx]

        out.append(raised(run))
    return out


def _attention(rng: np.random.Generator, dtype: Any) -> Any:
    """Causal attention and its gradients in ``dtype`` over (batch x head) rows: query
    counts around 32, key counts around 64, more keys than queries, one query; ``out``,
    ``lse``, ``dq``, ``dk``, ``dv``."""
    from module5.fused import causal_attention as forward
    from module5.fused import causal_attention_backward as backward

    out = []
    for heads, t, s, d, dv in ((2, 5, 5, 4, 4), (1, 33, 65, 8, 3), (2, 1, 9, 4, 4),
                               (1, 40, 70, 16, 16)):  # fmt: skip
        q, k = rng.normal(size=(heads, t, d)), rng.normal(size=(heads, s, d))
        v, g = rng.normal(size=(heads, s, dv)), rng.normal(size=(heads, t, dv))
        q, k, v, g = (a.astype(dtype) for a in (q, k, v, g))

        def run(q: Array = q, k: Array = k, v: Array = v, g: Array = g) -> Any:
            o, lse = np.full((*q.shape[:2], v.shape[2]), 7.0, q.dtype), np.full(q.shape[:2], 7.0)
            scale = 1 / math.sqrt(q.shape[2])
            forward(q, k, v, o, lse, scale)
            grads = [np.full_like(a, 7.0) for a in (q, k, v)]
            backward(q, k, v, o, lse, g, *grads, scale)
            return [o, lse, *grads]

        out.append(raised(run))
    return out


# One check per dtype, as the tests (test_fused.py) are: each compiles its own kernels,
# and both in one check took the reference 64 s of the 60 a check may run, cold.
@check("5.5", rtol=1e-4, atol=1e-5)
def causal_attention(rng: np.random.Generator) -> Any:
    """:func:`_attention` in float64."""
    return _attention(rng, np.float64)


@check("5.5", rtol=1e-4, atol=1e-5)
def causal_attention_float32(rng: np.random.Generator) -> Any:
    """:func:`_attention` in float32."""
    return _attention(rng, np.float32)


# =========================================================================================
# Task 5.6: recurrent cells and the sequence loop
# =========================================================================================

_RNN_MODES = ("RNN", "LSTM", "GRU")


def _recurrent(mode: str, sizes: tuple[int, int, int], seed: int, dtype: Any,
               batch_first: bool = False) -> Any:  # fmt: skip
    """A sequence module of ``mode`` on :func:`_simple` with every parameter drawn afresh
    (:func:`randomize`, as the local tests ``test_rnn.py`` draw them)."""
    from module5.rnn import GRU, LSTM, RNN

    cls = {"RNN": RNN, "LSTM": LSTM, "GRU": GRU}[mode]
    i, h, layers = sizes
    net = cls(i, h, num_layers=layers, batch_first=batch_first,
              rng=np.random.default_rng(seed), backend=_simple())  # fmt: skip
    net.to(dtype)
    randomize(net, seed + 100)
    return net


def _finals(state: Any) -> list[Array]:
    return [t.to_numpy() for t in (state if isinstance(state, tuple) else (state,))]


@check("5.6", rtol=2e-5, atol=1e-6)
def lstm_gru_cells(rng: np.random.Generator) -> Any:
    """``lstm_cell`` and ``gru_cell`` on random weights, inputs and states, both dtypes,
    with and without biases."""
    from module5.rnn import gru_cell, lstm_cell

    out = []
    for i in range(6):
        n, n_in, h = (int(s) for s in rng.integers(1, 5, 3))
        d, bias = DTYPES[i % 2], i != 4
        gates = 4 if i < 3 else 3
        w_ih, w_hh = rng.normal(size=(gates * h, n_in)), rng.normal(size=(gates * h, h))
        b_ih, b_hh = rng.normal(size=gates * h), rng.normal(size=gates * h)
        x, h0, c0 = rng.normal(size=(n, n_in)), rng.normal(size=(n, h)), rng.normal(size=(n, h))

        def run(i: int = i, d: Any = d, bias: bool = bias, arrays: tuple[Array, ...] = (
                x, h0, c0, w_ih, w_hh, b_ih, b_hh)) -> Any:  # fmt: skip
            x, h0, c0, w_ih, w_hh, b_ih, b_hh = (_constant(a, d) for a in arrays)
            biases = (b_ih, b_hh) if bias else (None, None)
            if i < 3:
                h1, c1 = lstm_cell(x, (h0, c0), w_ih, w_hh, *biases)
                return [h1.to_numpy(), c1.to_numpy()]
            return gru_cell(x, h0, w_ih, w_hh, *biases).to_numpy()

        out.append(raised(run))
    return out


def _sequence_cases(rng: np.random.Generator) -> list[dict[str, Any]]:
    cases = []
    for i in range(6):
        mode = _RNN_MODES[i % 3]
        sizes = (int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        t, n = int(rng.integers(1, 5)), int(rng.integers(1, 3))
        h0 = [rng.normal(size=(sizes[2], n, sizes[1])) for _ in range(2 if mode == "LSTM" else 1)]
        cases.append({"mode": mode, "sizes": sizes, "seed": int(rng.integers(1000)),
                      "dtype": DTYPES[(i // 3) % 2], "batch_first": i in (1, 5),
                      "x": rng.normal(size=(t, n, sizes[0])),
                      "h0": h0 if i % 2 == 0 else None})  # fmt: skip
    return cases


def _run_sequence(c: dict[str, Any], grad: bool = False) -> tuple[Any, Any, Any, list[Any]]:
    """The case's module, its output and final state, the input leaf and state leaves."""
    d = c["dtype"]
    net = _recurrent(c["mode"], c["sizes"], c["seed"], d, c["batch_first"])
    x = c["x"].transpose(1, 0, 2) if c["batch_first"] else c["x"]
    leaf = _make(x, grad=grad, dtype=d)
    states = [_make(h, grad=grad, dtype=d) for h in c["h0"]] if c["h0"] is not None else []
    hx = None if not states else (states[0], states[1]) if c["mode"] == "LSTM" else states[0]
    out, h_n = net(leaf, hx)
    return net, out, h_n, [leaf, *states]


@check("5.6", rtol=2e-5, atol=1e-6)
def rnn_sequences(rng: np.random.Generator) -> Any:
    """RNN, LSTM and GRU modules of one to three layers over a few steps: the output and
    the final states, from given initial states and from zeros, batch first or not."""
    out = []
    for c in _sequence_cases(rng):

        def run(c: dict[str, Any] = c) -> Any:
            _, output, h_n, _ = _run_sequence(c)
            return [output.to_numpy(), *_finals(h_n)]

        out.append(raised(run))
    return out


@check("5.6", "rnn_sequences.backward", rtol=2e-4, atol=1e-6)
def rnn_sequences_backward(rng: np.random.Generator) -> Any:
    """Backpropagation through time: the gradients of a weighted sum of the output and
    the final states for every parameter, the input and the initial states."""
    out = []
    for c in _sequence_cases(rng):
        t, n = c["x"].shape[:2]
        w = rng.normal(size=(t, n, c["sizes"][1]))
        w_fin = rng.normal(size=(c["sizes"][2], n, c["sizes"][1]))

        def run(c: dict[str, Any] = c, w: Array = w, w_fin: Array = w_fin) -> Any:
            net, output, h_n, leaves = _run_sequence(c, grad=True)
            d = c["dtype"]
            weights = w.transpose(1, 0, 2) if c["batch_first"] else w
            loss = (output * _constant(weights, d)).sum()
            for f in h_n if isinstance(h_n, tuple) else (h_n,):
                loss = loss + (f * _constant(w_fin, d)).sum()
            loss.backward()
            grads = {name: _grad(p.value) for name, p in net.named_parameters()}
            return [grads, *(_grad(leaf) for leaf in leaves)]

        out.append(raised(run))
    return out


@check("5.6", rtol=2e-5, atol=1e-6)
def truncated_bptt(rng: np.random.Generator) -> Any:
    """Two chunks, the second from the first's final state detached: the first chunk's
    input gets no gradient, the parameters get the second chunk's."""
    from module5.rnn import detach_state

    out = []
    for mode in ("LSTM", "GRU"):
        seed = int(rng.integers(1000))
        x1, x2 = rng.normal(size=(3, 2, 2)), rng.normal(size=(2, 2, 2))
        w = rng.normal(size=(2, 2, 3))

        def run(mode: str = mode, seed: int = seed, x1: Array = x1, x2: Array = x2,
                w: Array = w) -> Any:  # fmt: skip
            net = _recurrent(mode, (2, 3, 2), seed, np.float64)
            first = _make(x1, grad=True)
            _, state = net(first)
            second, _ = net(_make(x2), detach_state(state))
            (second * _constant(w)).sum().backward()
            grads = {name: _grad(p.value) for name, p in net.named_parameters()}
            return [grads, _grad(first) is None or not _grad(first).any()]  # type: ignore[union-attr]

        out.append(raised(run))
    return out

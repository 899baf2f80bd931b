"""PyTorch parity for stage 5: LayerNorm, GELU (tanh form), the masked softmax,
scaled dot-product attention, a whole GPT's logits and gradients, and the RNN, LSTM and
GRU (cells and multi-layer modules, PyTorch's weights loaded one to one), against ``torch``
on the CPU, in float64 and float32, on random shapes and non-contiguous inputs.
Skipped where PyTorch is not installed; not graded (no task marker)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
F = torch.nn.functional

from module1.tensor import from_numpy  # noqa: E402
from module2.fast_ops import FastTensorBackend as FAST  # noqa: E402
from module5.functional import (  # noqa: E402
    causal_mask,
    gelu,
    layer_norm,
    masked_softmax,
    scaled_dot_product_attention,
)
from module5.gpt import GPT, GPTConfig  # noqa: E402
from module5.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell  # noqa: E402

DTYPES = {np.float64: torch.float64, np.float32: torch.float32}
TOL = {np.float64: 1e-9, np.float32: 3e-5}


def both(values: np.ndarray, dtype: type, transposed: bool = False) -> tuple[object, object]:
    """The same values as our tensor (a transposed view when asked) and torch's leaf."""
    ours = from_numpy(values.astype(dtype), FAST, requires_grad=True)
    if transposed:
        ours = from_numpy(np.ascontiguousarray(np.swapaxes(values, -1, -2)).astype(dtype), FAST,
                          requires_grad=True)  # fmt: skip
        leaf = ours
        ours = ours.transpose(-2, -1)
        return (leaf, ours), torch.tensor(values, dtype=DTYPES[dtype], requires_grad=True)
    return (ours, ours), torch.tensor(values, dtype=DTYPES[dtype], requires_grad=True)


def close(ours: object, theirs: object, dtype: type, scale: float = 1.0) -> None:
    got = ours.to_numpy() if hasattr(ours, "to_numpy") else ours
    want = theirs.detach().numpy()
    np.testing.assert_allclose(got, want, rtol=TOL[dtype] * scale, atol=TOL[dtype] * scale)


def grad_of(leaf: object, transposed: bool) -> np.ndarray:
    g = leaf.grad.to_numpy()
    return np.swapaxes(g, -1, -2) if transposed else g


shapes = st.lists(st.integers(1, 5), min_size=2, max_size=4).map(tuple)


@pytest.mark.parametrize("dtype", list(DTYPES))
@given(shape=shapes, seed=st.integers(0, 2**16), transposed=st.booleans())
@settings(max_examples=20)
def test_layer_norm_and_gelu_match_torch(dtype: type, shape: tuple[int, ...], seed: int,
                                         transposed: bool) -> None:  # fmt: skip
    rng = np.random.default_rng(seed)
    x = rng.normal(scale=3.0, size=shape)
    n = shape[-1]
    w, b = rng.normal(size=n), rng.normal(size=n)
    (leaf, ours), theirs = both(x, dtype, transposed)
    (wl, wo), wt = both(w, dtype)
    (bl, bo), bt = both(b, dtype)
    g = rng.normal(size=shape)
    y = gelu(layer_norm(ours, wo, bo))
    t = F.gelu(F.layer_norm(theirs, (n,), wt, bt, eps=1e-5), approximate="tanh")
    close(y, t, dtype, 10)
    (y * from_numpy(g.astype(dtype), FAST)).sum().backward()
    (t * torch.tensor(g, dtype=DTYPES[dtype])).sum().backward()
    np.testing.assert_allclose(grad_of(leaf, transposed), theirs.grad.numpy(),
                               rtol=TOL[dtype] * 100, atol=TOL[dtype] * 100)  # fmt: skip
    close(wl.grad, wt.grad, dtype, 100)
    close(bl.grad, bt.grad, dtype, 100)


@pytest.mark.parametrize("dtype", list(DTYPES))
@given(seed=st.integers(0, 2**16), t=st.integers(1, 6), extra=st.integers(0, 3),
       heads=st.integers(1, 3), transposed=st.booleans())  # fmt: skip
@settings(max_examples=20)
def test_attention_matches_torch(dtype: type, seed: int, t: int, extra: int, heads: int,
                                 transposed: bool) -> None:  # fmt: skip
    """Causal, with ``S = T + extra`` keys (a cache): torch's ``attn_mask`` is the same
    lower triangle shifted by ``S - T``."""
    rng = np.random.default_rng(seed)
    s, d = t + extra, 4
    q, k, v = (
        rng.normal(size=(2, heads, t, d)),
        rng.normal(size=(2, heads, s, d)),
        rng.normal(size=(2, heads, s, 3)),
    )
    (ql, qo), qt = both(q, dtype, transposed)
    (kl, ko), kt = both(k, dtype)
    (vl, vo), vt = both(v, dtype)
    y = scaled_dot_product_attention(qo, ko, vo, causal=True)
    mask = torch.tensor(causal_mask(t, s))
    want = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask)
    close(y, want, dtype, 10)
    g = rng.normal(size=(2, heads, t, 3))
    (y * from_numpy(g.astype(dtype), FAST)).sum().backward()
    (want * torch.tensor(g, dtype=DTYPES[dtype])).sum().backward()
    np.testing.assert_allclose(grad_of(ql, transposed), qt.grad.numpy(),
                               rtol=TOL[dtype] * 100, atol=TOL[dtype] * 100)  # fmt: skip
    close(kl.grad, kt.grad, dtype, 100)
    close(vl.grad, vt.grad, dtype, 100)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_masked_softmax_matches_torch_where_a_row_keeps_something(dtype: type) -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(scale=4.0, size=(5, 7))
    keep = rng.random((5, 7)) < 0.6
    keep[:, 2] = True
    (leaf, ours), theirs = both(x, dtype)
    y = masked_softmax(ours, keep)
    want = torch.softmax(theirs.masked_fill(torch.tensor(~keep), float("-inf")), -1)
    close(y, want, dtype)
    g = rng.normal(size=x.shape)
    (y * from_numpy(g.astype(dtype), FAST)).sum().backward()
    (want * torch.tensor(g, dtype=DTYPES[dtype])).sum().backward()
    close(leaf.grad, theirs.grad, dtype, 10)


def test_a_gpt_matches_the_same_model_in_torch() -> None:
    """Our GPT's weights copied into a torch model built from ``torch.nn.functional``:
    the logits and every parameter's gradient agree (float64)."""
    config = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=8)
    model = GPT(config, seed=5)
    params = {
        n: torch.tensor(p.value.to_numpy(), requires_grad=True) for n, p in model.named_parameters()
    }
    idx = np.random.default_rng(0).integers(0, 11, (2, 6))

    def theirs(tokens: np.ndarray) -> object:
        b, t = tokens.shape
        x = params["wte.weight"][torch.tensor(tokens)] + params["wpe.weight"][:t]
        for i in range(config.n_layer):
            p = {k.removeprefix(f"h{i}."): v for k, v in params.items() if k.startswith(f"h{i}.")}
            h = F.layer_norm(x, (8,), p["ln_1.weight"], p["ln_1.bias"])
            qkv = h @ p["attn.c_attn.weight"] + p["attn.c_attn.bias"]
            q, k, v = (z.view(b, t, 2, 4).transpose(1, 2) for z in qkv.split(8, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).reshape(b, t, 8) @ p["attn.c_proj.weight"] + p["attn.c_proj.bias"]
            x = x + y
            h = F.layer_norm(x, (8,), p["ln_2.weight"], p["ln_2.bias"])
            h = F.gelu(h @ p["mlp.c_fc.weight"] + p["mlp.c_fc.bias"], approximate="tanh")
            x = x + h @ p["mlp.c_proj.weight"] + p["mlp.c_proj.bias"]
        x = F.layer_norm(x, (8,), params["ln_f.weight"], params["ln_f.bias"])
        return x @ params["wte.weight"].T

    ours = model(idx)
    want = theirs(idx)
    np.testing.assert_allclose(ours.to_numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = np.random.default_rng(1).normal(size=ours.shape)
    (ours * from_numpy(g, FAST)).sum().backward()
    (want * torch.tensor(g)).sum().backward()
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.value.grad.to_numpy(), params[name].grad.numpy(),
                                   rtol=1e-8, atol=1e-11, err_msg=name)  # fmt: skip


RECURRENT = {"RNN": (RNN, torch.nn.RNN), "LSTM": (LSTM, torch.nn.LSTM), "GRU": (GRU, torch.nn.GRU)}
RECURRENT_CELLS = {"RNN": (RNNCell, torch.nn.RNNCell), "LSTM": (LSTMCell, torch.nn.LSTMCell),
                   "GRU": (GRUCell, torch.nn.GRUCell)}  # fmt: skip


def load_torch_weights(ours: object, theirs: object, dtype: type) -> None:
    """PyTorch's parameters into ours, name by name: the same names and shapes."""
    names = [n for n, _ in ours.named_parameters()]  # type: ignore[attr-defined]
    assert names == [n for n, _ in theirs.named_parameters()]  # type: ignore[attr-defined]
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters(),  # type: ignore[attr-defined]
                                 strict=True):  # fmt: skip
        assert p.value.shape == tuple(q.shape), name
        p.update(from_numpy(q.detach().numpy().astype(dtype), FAST))


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("mode", list(RECURRENT))
@pytest.mark.parametrize("batch_first", [False, True])
def test_recurrent_modules_match_torch_with_its_weights(mode: str, dtype: type,
                                                        batch_first: bool) -> None:  # fmt: skip
    """Two layers over six steps with an initial state: the output, the final states and
    every gradient, PyTorch's own initial weights loaded one to one."""
    ours_cls, theirs_cls = RECURRENT[mode]
    torch.manual_seed(0)
    theirs = theirs_cls(3, 4, num_layers=2, batch_first=batch_first).to(DTYPES[dtype])
    ours = ours_cls(3, 4, num_layers=2, batch_first=batch_first)
    load_torch_weights(ours, theirs, dtype)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 6, 3) if batch_first else (6, 2, 3))
    states = [rng.normal(size=(2, 2, 4)) for _ in range(2 if mode == "LSTM" else 1)]
    (xl, xo), xt = both(x, dtype)
    pairs = [both(h, dtype) for h in states]
    hx_ours = tuple(p[0][1] for p in pairs) if mode == "LSTM" else pairs[0][0][1]
    hx_theirs = tuple(p[1] for p in pairs) if mode == "LSTM" else pairs[0][1]
    out, h_n = ours(xo, hx_ours)
    t_out, t_h = theirs(xt, hx_theirs)
    close(out, t_out, dtype, 10)
    finals = h_n if isinstance(h_n, tuple) else (h_n,)
    t_finals = t_h if isinstance(t_h, tuple) else (t_h,)
    for a, b in zip(finals, t_finals, strict=True):
        close(a, b, dtype, 10)
    g = rng.normal(size=out.shape)
    loss = (out * from_numpy(g.astype(dtype), FAST)).sum() + finals[-1].sum()
    loss.backward()
    ((t_out * torch.tensor(g, dtype=DTYPES[dtype])).sum() + t_finals[-1].sum()).backward()
    close(xl.grad, xt.grad, dtype, 100)
    for (leaf, _), t_leaf in pairs:  # the initial states
        close(leaf.grad, t_leaf.grad, dtype, 100)
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters(),
                                 strict=True):  # fmt: skip
        tol = TOL[dtype] * 100
        np.testing.assert_allclose(p.value.grad.to_numpy(), q.grad.numpy(), rtol=tol, atol=tol,
                                   err_msg=name)  # fmt: skip


@pytest.mark.parametrize("mode", list(RECURRENT_CELLS))
def test_recurrent_cells_match_torch_with_its_weights(mode: str) -> None:
    ours_cls, theirs_cls = RECURRENT_CELLS[mode]
    torch.manual_seed(1)
    theirs = theirs_cls(3, 5).double()
    ours = ours_cls(3, 5)
    load_torch_weights(ours, theirs, np.float64)
    rng = np.random.default_rng(2)
    x, h, c = rng.normal(size=(4, 3)), rng.normal(size=(4, 5)), rng.normal(size=(4, 5))
    as_torch = [torch.tensor(a) for a in (x, h, c)]
    xo, ho, co = (from_numpy(a, FAST) for a in (x, h, c))
    if mode == "LSTM":
        got, want = ours(xo, (ho, co)), theirs(as_torch[0], (as_torch[1], as_torch[2]))
        for a, b in zip(got, want, strict=True):
            close(a, b, np.float64)
    else:
        close(ours(xo, ho), theirs(as_torch[0], as_torch[1]), np.float64)

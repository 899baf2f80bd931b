"""Plain solutions of stage 5's tasks, written from ``module5/README.md``: what a student
may write for full marks.

Straight from the README's formulas with tensor operations: LayerNorm with ``mean``,
GELU term by term, the masked softmax with ``MASKED`` filled in and a row count of kept
entries, attention as four lines; the GPT and its blocks as the README lists them; AdamW
as ``FastAdam.step`` plus a multiply; the clipping, schedule, tokenizer and batches in
NumPy; the LSTM and GRU steps gate by gate and the layer loop as two plain loops.
Nothing here uses a name the handout's files do not have.

``BODIES`` maps (task id, function as the registry names it) to the code that replaces
the stub between the task's begin and end lines (see ``autograder.regions.fill_text``).
"""

from __future__ import annotations

LAYER_NORM_FORWARD = """
mean = x.mean(-1, keepdim=True)
centred = x - mean
var = (centred * centred).mean(-1, keepdim=True)
r = (var + eps) ** -0.5
xhat = centred * r
ctx.save_for_backward(xhat, r, weight)
return xhat * weight + bias
"""

LAYER_NORM_BACKWARD = """
xhat, r, weight = ctx.saved_values
g = d * weight
dx = r * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
return dx, _rows(d * xhat).sum(0), _rows(d).sum(0)
"""

GELU_FORWARD = """
t = (GELU_C * (x + 0.044715 * x * x * x)).tanh()
ctx.save_for_backward(x, t)
return 0.5 * x * (1.0 + t)
"""

GELU_BACKWARD = """
x, t = ctx.saved_values
return d * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3 * 0.044715 * x * x))
"""

MASKED_SOFTMAX = """
if keep is None:
    keep = np.ones(x.shape[-1:], dtype=bool)
ones = from_numpy(keep.astype(x.dtype), x.backend)
scores = masked_fill(x, ~keep, MASKED)
biggest = scores.detach().max(-1, keepdim=True)
e = (scores - biggest).exp() * ones
nothing_kept = np.broadcast_to(keep, x.shape).sum(-1, keepdims=True) == 0
return e / (e.sum(-1, keepdim=True) + from_numpy(nothing_kept.astype(x.dtype), x.backend))
"""

ATTENTION = """
t, s = q.shape[-2], k.shape[-2]
allowed = np.ones((t, s), dtype=bool)
if causal:
    allowed = allowed & causal_mask(t, s)
if mask is not None:
    allowed = allowed & np.asarray(mask, dtype=bool)
w = masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), allowed)
if dropout > 0.0 and rng is not None:
    w = w * from_numpy(dropout_mask(w.shape, dropout, rng).astype(q.dtype), q.backend)
return w @ v
"""

MHA_FORWARD = """
b, t, c = x.shape
qkv = _tokens(self.c_attn, x)
q, k, v = split(qkv, c, -1)
q, k, v = self._heads(q, b, t), self._heads(k, b, t), self._heads(v, b, t)
if cache is not None:
    if cache.k is not None:
        k = cat([cache.k, k], 2)
        v = cat([cache.v, v], 2)
    cache.k = k.detach()
    cache.v = v.detach()
p = self.dropout if self.training else 0.0
y = scaled_dot_product_attention(q, k, v, causal=True, dropout=p, rng=self.rng)
y = y.permute(0, 2, 1, 3).contiguous().view(b, t, c)
return self.resid_drop(_tokens(self.c_proj, y))
"""

BLOCK_FORWARD = """
h = x + self.attn(self.ln_1(x), cache)
return h + self.mlp(self.ln_2(h))
"""

GPT_FORWARD = """
b, t = tokens.shape
pos = np.tile(np.arange(start, start + t), (b, 1))
x = self.drop(self.wte(tokens) + self.wpe(pos))
if cache is not None and len(cache.layers) == 0:
    cache.layers = [LayerCache() for _ in self.blocks]
for i, block in enumerate(self.blocks):
    layer_cache = None if cache is None else cache.layers[i]
    x = block(x, layer_cache)
x = self.ln_f(x)
return x @ self.wte.weight.value.permute(1, 0)
"""

ADAMW_STEP = """
beta1, beta2 = self.betas
for i, p, param, grad in _prepare(self.parameters, self._checked):
    param *= 1.0 - self.lr * self.weight_decays[i]
    m, _ = _state(self.first_moment, i, p, param.size, "first moment")
    v, _ = _state(self.second_moment, i, p, param.size, "second moment")
    self.steps[i] += 1
    adam_update(param, grad, m, v, self.lr, beta1, beta2, self.eps, self.steps[i])
"""

CLIP = """
parameters = list(parameters)
total = 0.0
for p in parameters:
    if p.value.grad is not None:
        total += float((p.value.grad.to_numpy().astype(np.float64) ** 2).sum())
total = math.sqrt(total)
if total > max_norm:
    for p in parameters:
        if p.value.grad is not None:
            p.value.grad = p.value.grad * (max_norm / (total + 1e-6))
return total
"""

COSINE = """
if step < warmup:
    return lr * (step + 1) / warmup
if step >= total:
    return min_lr
done = (step - warmup) / (total - warmup)
return min_lr + (lr - min_lr) * (1 + math.cos(math.pi * done)) / 2
"""

ENCODE = """
return np.array([self.index[c] for c in text], dtype=np.int64)
"""

DECODE = """
return "".join(self.chars[int(i)] for i in ids)
"""

GET_BATCH = """
starts = rng.integers(0, len(data) - block_size, size=batch_size)
x = np.stack([data[s : s + block_size] for s in starts]).astype(np.int64)
y = np.stack([data[s + 1 : s + 1 + block_size] for s in starts]).astype(np.int64)
return x, y
"""


# Task 5.5: the kernels as a student writes them from the README's "Task 5.5": loops
# over each row with ``math.exp`` / ``math.tanh``, ``prange`` over rows, the weight and
# bias gradients of LayerNorm as a second loop over columns (no partial sums).

SOFTMAX_ROWS = """
rows, n = x.shape
for r in prange(rows):
    kept = min(n, r % period + shift + 1)
    m = x[r, 0]
    for j in range(1, kept):
        if x[r, j] > m:
            m = x[r, j]
    total = 0.0
    for j in range(kept):
        e = math.exp(x[r, j] - m)
        out[r, j] = e
        total += e
    for j in range(kept):
        out[r, j] = out[r, j] / total
    for j in range(kept, n):
        out[r, j] = 0.0
"""

SOFTMAX_ROWS_BACKWARD = """
rows, n = y.shape
for r in prange(rows):
    dot = 0.0
    for j in range(n):
        dot += y[r, j] * dy[r, j]
    for j in range(n):
        dx[r, j] = y[r, j] * (dy[r, j] - dot)
"""

LAYER_NORM_ROWS = """
rows, n = x.shape
for r in prange(rows):
    first = x[r, 0]
    total = 0.0
    squares = 0.0
    for j in range(n):
        v = x[r, j] - first
        total += v
        squares += v * v
    mu = total / n
    m = first + mu
    var = max(squares / n - mu * mu, 0.0)
    inv = 1.0 / math.sqrt(var + eps)
    mean[r] = m
    rstd[r] = inv
    for j in range(n):
        out[r, j] = (x[r, j] - m) * inv * weight[j] + bias[j]
"""

LAYER_NORM_ROWS_BACKWARD = """
rows, n = x.shape
for r in prange(rows):
    g_mean = 0.0
    gx_mean = 0.0
    for j in range(n):
        xhat = (x[r, j] - mean[r]) * rstd[r]
        g = d[r, j] * weight[j]
        g_mean += g
        gx_mean += g * xhat
    g_mean /= n
    gx_mean /= n
    for j in range(n):
        xhat = (x[r, j] - mean[r]) * rstd[r]
        dx[r, j] = rstd[r] * (d[r, j] * weight[j] - g_mean - xhat * gx_mean)
for j in prange(n):
    sw = 0.0
    sb = 0.0
    for r in range(rows):
        sw += d[r, j] * (x[r, j] - mean[r]) * rstd[r]
        sb += d[r, j]
    dweight[j] = sw
    dbias[j] = sb
"""

GELU_KERNEL_FORWARD = """
c = math.sqrt(2.0 / math.pi)
for i in range(len(x)):
    v = x[i]
    out[i] = 0.5 * v * (1.0 + math.tanh(c * (v + 0.044715 * v * v * v)))
"""

GELU_KERNEL_BACKWARD = """
c = math.sqrt(2.0 / math.pi)
for i in range(len(x)):
    v = x[i]
    t = math.tanh(c * (v + 0.044715 * v * v * v))
    du = c * (1.0 + 3.0 * 0.044715 * v * v)
    dx[i] = d[i] * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * du)
"""

CAUSAL_ATTENTION = """
heads, t, d = q.shape
keys, width = k.shape[1], v.shape[2]
shift = keys - t
for task in prange(heads * t):
    b = task // t
    i = task % t
    m = -math.inf
    total = 0.0
    acc = np.zeros(width)
    for j in range(min(keys, i + shift + 1)):
        score = 0.0
        for c in range(d):
            score += q[b, i, c] * k[b, j, c]
        score *= scale
        if score > m:
            alpha = math.exp(m - score)
            total *= alpha
            for c in range(width):
                acc[c] *= alpha
            m = score
        p = math.exp(score - m)
        total += p
        for c in range(width):
            acc[c] += p * v[b, j, c]
    for c in range(width):
        out[b, i, c] = acc[c] / total
    lse[b, i] = m + math.log(total)
"""

CAUSAL_ATTENTION_BACKWARD = """
heads, t, d = q.shape
keys, width = k.shape[1], v.shape[2]
shift = keys - t
for b in prange(heads):
    for i in range(t):
        for c in range(d):
            dq[b, i, c] = 0.0
    for j in range(keys):
        for c in range(d):
            dk[b, j, c] = 0.0
        for c in range(width):
            dv[b, j, c] = 0.0
    for i in range(t):
        big = 0.0
        for c in range(width):
            big += dout[b, i, c] * out[b, i, c]
        for j in range(min(keys, i + shift + 1)):
            score = 0.0
            for c in range(d):
                score += q[b, i, c] * k[b, j, c]
            p = math.exp(score * scale - lse[b, i])
            dp = 0.0
            for c in range(width):
                dp += dout[b, i, c] * v[b, j, c]
                dv[b, j, c] += p * dout[b, i, c]
            ds = p * (dp - big) * scale
            for c in range(d):
                dq[b, i, c] += ds * k[b, j, c]
                dk[b, j, c] += ds * q[b, i, c]
"""

LSTM_CELL = """
h, c = state
gates = linear(x, w_ih, b_ih) + linear(h, w_hh, b_hh)
n = h.shape[1]
i, f, g, o = split(gates, n, 1)
i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
c_new = f * c + i * g
h_new = o * c_new.tanh()
return h_new, c_new
"""

GRU_CELL = """
x_r, x_z, x_n = chunk(linear(x, w_ih, b_ih), 3, 1)
h_r, h_z, h_n = chunk(linear(h, w_hh, b_hh), 3, 1)
r = (x_r + h_r).sigmoid()
z = (x_z + h_z).sigmoid()
n = (x_n + r * h_n).tanh()
return (1.0 - z) * n + z * h
"""

RUN_LAYERS = """
inputs = steps
final_states = []
for layer in range(self.num_layers):
    s = state[layer]
    outputs = []
    for x in inputs:
        s = self._step(x, s, f"_l{layer}")
        outputs.append(s[0])
    final_states.append(s)
    inputs = outputs
return inputs, final_states
"""

BODIES: dict[tuple[str, str], str] = {
    ("5.5", "softmax_rows"): SOFTMAX_ROWS,
    ("5.5", "softmax_rows_backward"): SOFTMAX_ROWS_BACKWARD,
    ("5.5", "layer_norm_rows"): LAYER_NORM_ROWS,
    ("5.5", "layer_norm_rows_backward"): LAYER_NORM_ROWS_BACKWARD,
    ("5.5", "gelu_forward"): GELU_KERNEL_FORWARD,
    ("5.5", "gelu_backward"): GELU_KERNEL_BACKWARD,
    ("5.5", "causal_attention"): CAUSAL_ATTENTION,
    ("5.5", "causal_attention_backward"): CAUSAL_ATTENTION_BACKWARD,
    ("5.1", "LayerNormFun.forward"): LAYER_NORM_FORWARD,
    ("5.1", "LayerNormFun.backward"): LAYER_NORM_BACKWARD,
    ("5.1", "GELUFun.forward"): GELU_FORWARD,
    ("5.1", "GELUFun.backward"): GELU_BACKWARD,
    ("5.2", "masked_softmax"): MASKED_SOFTMAX,
    ("5.2", "scaled_dot_product_attention"): ATTENTION,
    ("5.3", "MultiHeadAttention.forward"): MHA_FORWARD,
    ("5.3", "Block.forward"): BLOCK_FORWARD,
    ("5.3", "GPT.forward"): GPT_FORWARD,
    ("5.4", "AdamW.step"): ADAMW_STEP,
    ("5.4", "clip_grad_norm_"): CLIP,
    ("5.4", "cosine_lr"): COSINE,
    ("5.4", "CharTokenizer.encode"): ENCODE,
    ("5.4", "CharTokenizer.decode"): DECODE,
    ("5.4", "get_batch"): GET_BATCH,
    ("5.6", "lstm_cell"): LSTM_CELL,
    ("5.6", "gru_cell"): GRU_CELL,
    ("5.6", "RNNBase._run_layers"): RUN_LAYERS,
}

"""Plain solutions of tasks 4.1, 4.2 and 4.6: what a student may write for full marks.

Loop nests straight from the definitions in ``module4/README.md``: a ``prange`` over
(image, output channel) pairs for the forward pass, over (image, input channel) pairs
for the input's gradient (each pair zeroes and then adds into its own slice), and over
output channels for the weight's gradient (each channel sums over the whole batch into
its own entries, so no two iterations write one place). Zero padding is a bounds check
on the input index; the stride multiplies the output index. Nothing here uses the
reference's unfolding or register-blocked helpers, only names the handout's
``module4/fast_conv.py`` has (``prange``).

``BODIES`` maps (task id, function as the registry names it) to the code that replaces
the stub between the task's begin and end lines (see ``autograder.regions.fill_text``).
"""

from __future__ import annotations

CONV1D_FORWARD = """
batch, in_channels, width = input.shape
out_channels, _, kernel = weight.shape
out_width = out.shape[2]
for pair in prange(batch * out_channels):
    b = pair // out_channels
    o = pair % out_channels
    for x in range(out_width):
        total = 0.0
        for c in range(in_channels):
            for k in range(kernel):
                i = x * stride + k - padding
                if 0 <= i < width:
                    total += weight[o, c, k] * input[b, c, i]
        out[b, o, x] = total
"""

CONV1D_BACKWARD_INPUT = """
batch, in_channels, width = grad_input.shape
out_channels, _, kernel = weight.shape
out_width = grad_out.shape[2]
for pair in prange(batch * in_channels):
    b = pair // in_channels
    c = pair % in_channels
    for i in range(width):
        grad_input[b, c, i] = 0.0
    for o in range(out_channels):
        for x in range(out_width):
            g = grad_out[b, o, x]
            for k in range(kernel):
                i = x * stride + k - padding
                if 0 <= i < width:
                    grad_input[b, c, i] += weight[o, c, k] * g
"""

CONV1D_BACKWARD_WEIGHT = """
batch, in_channels, width = input.shape
out_channels, _, kernel = grad_weight.shape
out_width = grad_out.shape[2]
for o in prange(out_channels):
    for c in range(in_channels):
        for k in range(kernel):
            total = 0.0
            for b in range(batch):
                for x in range(out_width):
                    i = x * stride + k - padding
                    if 0 <= i < width:
                        total += grad_out[b, o, x] * input[b, c, i]
            grad_weight[o, c, k] = total
"""

CONV2D_FORWARD = """
batch, in_channels, height, width = input.shape
out_channels, _, kernel_h, kernel_w = weight.shape
out_h, out_w = out.shape[2], out.shape[3]
for pair in prange(batch * out_channels):
    b = pair // out_channels
    o = pair % out_channels
    for y in range(out_h):
        for x in range(out_w):
            total = 0.0
            for c in range(in_channels):
                for kh in range(kernel_h):
                    r = y * stride_h + kh - pad_h
                    if 0 <= r < height:
                        for kw in range(kernel_w):
                            s = x * stride_w + kw - pad_w
                            if 0 <= s < width:
                                total += weight[o, c, kh, kw] * input[b, c, r, s]
            out[b, o, y, x] = total
"""

CONV2D_BACKWARD_INPUT = """
batch, in_channels, height, width = grad_input.shape
out_channels, _, kernel_h, kernel_w = weight.shape
out_h, out_w = grad_out.shape[2], grad_out.shape[3]
for pair in prange(batch * in_channels):
    b = pair // in_channels
    c = pair % in_channels
    for r in range(height):
        for s in range(width):
            grad_input[b, c, r, s] = 0.0
    for o in range(out_channels):
        for y in range(out_h):
            for x in range(out_w):
                g = grad_out[b, o, y, x]
                for kh in range(kernel_h):
                    r = y * stride_h + kh - pad_h
                    if 0 <= r < height:
                        for kw in range(kernel_w):
                            s = x * stride_w + kw - pad_w
                            if 0 <= s < width:
                                grad_input[b, c, r, s] += weight[o, c, kh, kw] * g
"""

CONV2D_BACKWARD_WEIGHT = """
batch, in_channels, height, width = input.shape
out_channels, _, kernel_h, kernel_w = grad_weight.shape
out_h, out_w = grad_out.shape[2], grad_out.shape[3]
for o in prange(out_channels):
    for c in range(in_channels):
        for kh in range(kernel_h):
            for kw in range(kernel_w):
                total = 0.0
                for b in range(batch):
                    for y in range(out_h):
                        r = y * stride_h + kh - pad_h
                        if 0 <= r < height:
                            for x in range(out_w):
                                s = x * stride_w + kw - pad_w
                                if 0 <= s < width:
                                    total += grad_out[b, o, y, x] * input[b, c, r, s]
                grad_weight[o, c, kh, kw] = total
"""

# Task 4.6, from module4/README.md alone: the statistics of a channel as a row of the
# (C, N * S) matrix, the backward with means instead of sums.
CHANNEL_STATS = """
n, c, s = x.shape
rows = x.permute(1, 0, 2).contiguous().view(c, n * s)
mean = rows.mean(1, keepdim=True)
var = ((rows - mean) ** 2).mean(1, keepdim=True)
return mean.view(1, c, 1), var.view(1, c, 1)
"""

BATCHNORM_FORWARD = """
r = 1.0 / (var + eps) ** 0.5
xhat = (x - mean) * r
ctx.save_for_backward(xhat, r, weight)
return xhat * weight + bias
"""

BATCHNORM_BACKWARD = """
xhat, r, weight = ctx.saved_values
n, c, s = d.shape
g = d * weight
mean_g = g.mean(0, keepdim=True).mean(2, keepdim=True)
mean_gx = (g * xhat).mean(0, keepdim=True).mean(2, keepdim=True)
dx = (g - mean_g - xhat * mean_gx) * r
dweight = (d * xhat).sum(2, keepdim=True).sum(0, keepdim=True)
dbias = d.sum(2, keepdim=True).sum(0, keepdim=True)
return dx, dweight, dbias, None, None
"""

UPDATE_RUNNING_STATS = """
unbiased = var * count / (count - 1)
return (
    running_mean + (mean - running_mean) * factor,
    running_var + (unbiased - running_var) * factor,
)
"""

BODIES: dict[tuple[str, str], str] = {
    ("4.1", "conv1d_forward"): CONV1D_FORWARD,
    ("4.1", "conv1d_backward_input"): CONV1D_BACKWARD_INPUT,
    ("4.1", "conv1d_backward_weight"): CONV1D_BACKWARD_WEIGHT,
    ("4.2", "conv2d_forward"): CONV2D_FORWARD,
    ("4.2", "conv2d_backward_input"): CONV2D_BACKWARD_INPUT,
    ("4.2", "conv2d_backward_weight"): CONV2D_BACKWARD_WEIGHT,
    ("4.6", "channel_stats"): CHANNEL_STATS,
    ("4.6", "BatchNormFun.forward"): BATCHNORM_FORWARD,
    ("4.6", "BatchNormFun.backward"): BATCHNORM_BACKWARD,
    ("4.6", "update_running_stats"): UPDATE_RUNNING_STATS,
}

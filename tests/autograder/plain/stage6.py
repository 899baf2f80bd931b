"""Plain solutions of stage 6's tasks, written from ``module6/README.md``: what a student
may write for full marks.

The ring as the README's two phases with a scratch array per step; the broadcast one
parameter at a time; the gradient sync with ``np.concatenate`` and ``np.split``; the
sampler with a padding loop; the bfloat16 codec by exponent, fraction and the lower
half's comparison with 0x8000; the scaler with NumPy's ``isfinite``. Nothing here uses
a name the handout's files do not have.
"""

from __future__ import annotations

RING = """
k = comm.Get_size()
r = comm.Get_rank()
if k == 1:
    return buffer
chunks = chunk_bounds(len(buffer), k)
right = (r + 1) % k
left = (r - 1) % k
for s in range(k - 1):
    a, b = chunks[(r - s) % k]
    c, d = chunks[(r - s - 1) % k]
    got = np.empty(d - c, dtype=buffer.dtype)
    comm.Sendrecv(buffer[a:b].copy(), dest=right, recvbuf=got, source=left)
    buffer[c:d] = buffer[c:d] + got
for s in range(k - 1):
    a, b = chunks[(r + 1 - s) % k]
    c, d = chunks[(r - s) % k]
    got = np.empty(d - c, dtype=buffer.dtype)
    comm.Sendrecv(buffer[a:b].copy(), dest=right, recvbuf=got, source=left)
    buffer[c:d] = got
return buffer
"""

BROADCAST = """
for p in module.parameters():
    array = p.value.to_numpy().copy()
    comm.Bcast(array, root=0)
    p.update(from_numpy(array, p.value.backend, dtype=p.value.dtype))
"""

SYNC = """
for bucket in self.buckets:
    pieces = []
    for i in bucket:
        v = parameters[i].value
        if v.grad is None:
            pieces.append(np.zeros(v.size, dtype=v.dtype))
        else:
            pieces.append(v.grad.to_numpy().reshape(-1).astype(v.dtype))
    buffer = np.concatenate(pieces)
    with self.timer:
        self.all_reduce(self.comm, buffer)
    buffer = buffer / self.size
    cuts = np.cumsum([parameters[i].value.size for i in bucket])[:-1]
    for i, part in zip(bucket, np.split(buffer, cuts)):
        v = parameters[i].value
        v.grad = from_numpy(part.reshape(v.shape), v.backend, dtype=v.dtype)
"""

INDICES = """
if self.shuffle:
    order = list(np.random.default_rng([self.seed, self.epoch]).permutation(self.n))
else:
    order = list(range(self.n))
i = 0
while len(order) % self.size:
    order.append(order[i])
    i += 1
return np.array(order[self.rank :: self.size])
"""

BODIES: dict[tuple[str, str], str] = {
    ("6.1", "ring_all_reduce"): RING,
    ("6.2", "broadcast_parameters"): BROADCAST,
    ("6.2", "DistributedDataParallel.sync_gradients"): SYNC,
    ("6.2", "DistributedSampler.indices"): INDICES,
}

ENCODE = """
for i in prange(len(x)):
    b = x[i]
    exponent = (b >> 23) & 0xFF
    fraction = b & 0x7FFFFF
    if exponent == 0xFF and fraction != 0:
        out[i] = (b >> 16) | 0x40
        continue
    upper = b >> 16
    lower = b & 0xFFFF
    if lower > 0x8000 or (lower == 0x8000 and upper % 2 == 1):
        upper = upper + 1
    out[i] = upper
"""

DECODE = """
for i in prange(len(bits)):
    out[i] = bits[i] * 65536
"""

UNSCALE = """
self.found_inf = False
for p in optimizer.parameters:
    grad = p.value.grad
    if grad is None:
        continue
    values = grad.to_numpy() / self.scale_value
    if not np.all(np.isfinite(values)):
        self.found_inf = True
    p.value.grad = from_numpy(values, grad.backend, dtype=grad.dtype)
"""

SKIP = """
if self.found_inf:
    self.skipped = self.skipped + 1
    return False
optimizer.step()
return True
"""

UPDATE = """
if found:
    self.scale_value = self.scale_value * self.backoff_factor
    self.clean_steps = 0
    return
self.clean_steps = self.clean_steps + 1
if self.clean_steps >= self.growth_interval:
    self.scale_value = self.scale_value * self.growth_factor
    self.clean_steps = 0
"""

BODIES.update(
    {
        ("6.3", "bfloat16_encode"): ENCODE,
        ("6.3", "bfloat16_decode"): DECODE,
        ("6.4", "GradScaler.unscale_"): UNSCALE,
        ("6.4", "GradScaler.step"): SKIP,
        ("6.4", "GradScaler.update"): UPDATE,
    }
)

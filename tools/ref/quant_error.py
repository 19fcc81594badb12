#!/usr/bin/env python3
"""Weight-level relative RMS error of bf16 / Q8_0 / Q4_0 / Q4_1 on synthetic
distributions (numpy emulation of GGUF rounding); numbers in docs/quant.md."""
import numpy as np
rng = np.random.default_rng(0)
def q8_0(x):
    b = x.reshape(-1, 32); d = np.abs(b).max(1, keepdims=True) / 127
    d16 = d.astype(np.float16).astype(np.float32)
    idd = np.where(d != 0, 1 / np.where(d != 0, d, 1), 0)
    q = np.round(b * idd)  # numpy rounds half to even; GGUF roundf half away - negligible
    return (q * d16).reshape(x.shape)
def q4_0(x):
    b = x.reshape(-1, 32); i = np.abs(b).argmax(1); mx = b[np.arange(len(b)), i][:, None]
    d = mx / -8; d16 = d.astype(np.float16).astype(np.float32)
    idd = np.where(d != 0, 1 / np.where(d != 0, d, 1), 0)
    q = np.minimum(15, np.trunc(b * idd + 8.5)); return ((q - 8) * d16).reshape(x.shape)
def q4_1(x):
    b = x.reshape(-1, 32); mn = b.min(1, keepdims=True); mx = b.max(1, keepdims=True)
    d = (mx - mn) / 15; d16 = d.astype(np.float16).astype(np.float32); m16 = mn.astype(np.float16).astype(np.float32)
    idd = np.where(d != 0, 1 / np.where(d != 0, d, 1), 0)
    q = np.minimum(15, np.trunc((b - mn) * idd + 0.5)); return (q * d16 + m16).reshape(x.shape)
def bf16(x):
    u = x.view(np.uint32).astype(np.uint64); u = ((u + 0x7fff + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32)
def rel(a, b): return np.sqrt(((a - b) ** 2).sum() / (b ** 2).sum())
N = 2048 * 2048
dists = {
 'normal': rng.standard_normal(N, dtype=np.float32) * 0.02,
 'student-t(4)': (rng.standard_t(4, N) * 0.02).astype(np.float32),
 'normal + 0.1% outliers x20': None,
}
x = rng.standard_normal(N).astype(np.float32) * 0.02
m = rng.random(N) < 0.001; x[m] *= 20; dists['normal + 0.1% outliers x20'] = x
print('| distribution | bf16 | Q8_0 | Q4_0 | Q4_1 |'); print('|---|---|---|---|---|')
for k, v in dists.items():
    print('| %s | %.5f | %.5f | %.4f | %.4f |' % (k, rel(bf16(v), v), rel(q8_0(v), v), rel(q4_0(v), v), rel(q4_1(v), v)))

# tools/ref/torch_matmul_rate.py — the yardsticks for the GPU expert GEMM
# (docs/perf/kernels.md): torch.matmul bf16 8192^3, torch._int_mm int8 8192^3
# and torch.bmm bf16 at the expert shapes of tests/ptx/gemm_kernels --bench,
# each the best of 20 CUDA-event-timed calls. Needs torch with CUDA.
import torch
def rate(fn, flops, reps=20):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    best = 1e9
    for _ in range(reps):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e))
    return flops / (best * 1e-3) / 1e12, best
N = 8192
a = torch.randn(N, N, dtype=torch.bfloat16, device='cuda'); b = torch.randn(N, N, dtype=torch.bfloat16, device='cuda')
print("torch.matmul bf16 8192^3: %.1f TFLOPS (%.3f ms)" % rate(lambda: a @ b, 2*N**3))
try:
    ai = torch.randint(-127, 127, (N, N), dtype=torch.int8, device='cuda')
    bi = torch.randint(-127, 127, (N, N), dtype=torch.int8, device='cuda').t().contiguous().t()
    print("torch._int_mm int8 8192^3: %.1f TOPS (%.3f ms)" % rate(lambda: torch._int_mm(ai, bi), 2*N**3))
except Exception as ex:
    print("int8 mm failed:", ex)
for E, n, K, R in ((128, 128, 2048, 768), (128, 512, 2048, 768), (8, 512, 4096, 14336)):
    x = torch.randn(E, n, K, dtype=torch.bfloat16, device='cuda'); w = torch.randn(E, K, R, dtype=torch.bfloat16, device='cuda')
    print("torch.bmm bf16 E=%d n=%d %dx%d: %.1f TFLOPS (%.3f ms)" % ((E, n, R, K) + rate(lambda: torch.bmm(x, w), 2.0*E*n*K*R)))

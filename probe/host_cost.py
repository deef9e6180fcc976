"""Per-call host cost and direct-launch cache hits, descriptors True vs host."""
import time, torch, croqtile, statistics
from croqtile.backends.triton import launcher as L
from triton.testing import do_bench
src = open('bench/kernels/gemm.co').read()
hits = [0]
orig = L._launch_compiled
def counting(*a, **k):
    hits[0] += 1
    return orig(*a, **k)
L._launch_compiled = counting
for cfg in [dict(TILE_M=64, TILE_N=128, num_stages=5, persistent=False),
            dict(TILE_M=64, TILE_N=128, TILE_K=128, num_stages=3, persistent=False),
            dict(TILE_M=128, TILE_N=128, num_stages=5, persistent=True)]:
    for desc in (True, "host", False):
        defines = {k: v for k, v in cfg.items() if k.isupper()}
        opts = {k: v for k, v in cfg.items() if not k.isupper()}
        m = croqtile.compile(src, defines=defines, descriptors=desc, num_warps=4, **opts)
        a = torch.randn(1024, 1024, device='cuda').half(); b = torch.randn(1024, 1024, device='cuda').half()
        c = torch.empty(1024, 1024, device='cuda', dtype=torch.half)
        m.gemm(a, b, c); torch.cuda.synchronize()
        hits[0] = 0
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            m.gemm(a, b, c)
        host = (time.perf_counter() - t0) / n * 1e6
        torch.cuda.synchronize()
        h = hits[0]
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(20):
                m.gemm(a, b, c)
        g.replay(); torch.cuda.synchronize()
        graph = do_bench(lambda: g.replay(), return_mode='median') * 1000 / 20
        plain = do_bench(lambda: m.gemm(a, b, c), return_mode='median') * 1000
        print(f"{cfg} desc={desc!s:5}: host {host:6.1f} us/call, cache hits {h}/{n}, "
              f"do_bench {plain:6.1f} us, graph {graph:6.1f} us", flush=True)

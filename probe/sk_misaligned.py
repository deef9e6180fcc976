import torch, croqtile, warnings
warnings.simplefilter("ignore")
src = open('bench/kernels/gemm.co').read()
for desc in (True, "host", False):
    for sk in (True, 2, False):
        m = croqtile.compile(src, defines={"TILE_M": 64, "TILE_N": 64, "TILE_K": 32}, descriptors=desc, persistent=True, stream_k=sk)
        gen = torch.Generator().manual_seed(11)
        res = []
        for (M, N, K) in [(100, 72, 96), (64, 64, 32), (230, 130, 160)]:
            for aligned in (True, False):
                a = torch.randn(M * K + 1, generator=gen).half()
                a = (a[:-1] if aligned else a[1:]).view(M, K).cuda()
                b = torch.randn(N, K, generator=gen).half().cuda()
                out = torch.full((M, N), float("nan"), dtype=torch.float16, device='cuda')
                m.gemm(a, b, out)
                ref = a.double() @ b.double().T
                bad = torch.isnan(out).sum().item()
                err = ((out.double() - ref).norm() / ref.norm()).item()
                res.append(f"{M}x{N}x{K}{'' if aligned else 'm'}: nan {bad} err {err:.1e}")
        print(f"desc={desc} sk={sk}: " + "; ".join(res), flush=True)

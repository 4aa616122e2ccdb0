#!/usr/bin/env bash
# The fused attention (kernels/flash_attn.h) at BERT-large's shape, B 32, L 512, NH 16, D 64, bf16,
# against the unfused padded path (tk_attention_fwd/_bwd: strided-batched GEMMs around the masked
# softmax) in the same process, and against torch's F.scaled_dot_product_attention with the flash
# backend (all lengths 512 only: it has no padding mask) as a reference point.
#
#   contrib/bench/flash_attn.sh          (from anywhere; builds nothing)
#
# Needs $BUILD/tests/gpu/test_flash_attn built with CUDA (BIN=path names another build of it) and an
# NVIDIA GPU; PEER=0 skips torch, OURS=0 runs torch only.
# Prints "# table" lines: milliseconds (median of 15 calls) and TFLOP/s of the forward and the
# backward, each counted as the model's work on the real tokens: forward 4 sum(len^2) NH D, the
# backward 2.5 times that (FlashAttention's convention; our backward recomputes S twice).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 4
BUILD=${BUILD:-build}
BIN=${BIN:-$BUILD/tests/gpu/test_flash_attn}
rc=0
if [ "${OURS:-1}" != 0 ]; then
    [ -x "$BIN" ] || { echo "flash_attn.sh: $BIN is not built" >&2; exit 2; }
    TK_FLASH_BENCH=1 "$BIN" flash_bench | grep -E '^# table|^#   |^not ok' || rc=1
fi
[ "${PEER:-1}" = 0 ] && exit $rc
${PYTHON:-python3} - <<'EOF' || rc=1
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

B, L, NH, D = 32, 512, 16, 64
torch.manual_seed(0)
# q, k, v as views of one fused projection (B, L, 3, NH, D), as BERT's would be
qkv = torch.randn(B, L, 3, NH, D, device="cuda", dtype=torch.bfloat16)


def med_ms(fn, iters=15):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return sorted(ts)[len(ts) // 2]


flops = 4.0 * B * L * L * NH * D
for p in (0.0, 0.1):
    x = qkv.detach().clone().requires_grad_(True)
    q, k, v = (x[:, :, i].transpose(1, 2) for i in range(3))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        fwd = med_ms(lambda: F.scaled_dot_product_attention(q, k, v, dropout_p=p))
        g = torch.randn(B, NH, L, D, device="cuda", dtype=torch.bfloat16)
        both = med_ms(lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, dropout_p=p), x, g))
    bwd = both - fwd
    print(f"# table torch sdpa flash all 512 p{p:.1f}  fwd {fwd:7.3f} ms ({flops / fwd * 1e-9:5.1f} TFLOP/s) "
          f"bwd {bwd:7.3f} ms ({2.5 * flops / bwd * 1e-9:5.1f})  (torch {torch.__version__})")
EOF
exit $rc

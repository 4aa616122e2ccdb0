// CUDA side of kernels/stem_conv.h, one kernel templated over the input side Hs and the output
// side Q (224: Hs 115, Q 112; 300: Hs 153, Q 150). Shared-memory layouts (each 16-channel pixel
// or filter tap row is 32 bytes, two 16-byte halves; a row's halves are swapped where bit 2 of its
// index is set, so the 8 rows an ldmatrix reads fall in 8 distinct bank groups):
//   in:  [2 buffers][5 input rows][Cols columns][2 halves]   (the row pair's input rows)
//   w:   [16 taps][64 output channels][2 halves]
//   out: [warps][16 Stage pixels][8 16-byte chunks], chunk c of pixel x at c ^ (x & 7)
// Cols = max(Hs, 16 warps + 3): where Q is not a multiple of 16 (150) the last warp's pixels run
// past Q and their taps past Hs into pad columns, zeroed once and never copied into, whose
// products land only in the masked pixels' outputs (an mma's output row is its A row's pixel).
// Stage (output rows staged at a time) is 2 where two blocks of 2 staged rows fit an SM (224) and
// 1 otherwise (300: 2 x 26,080 + 32,768 + 20,480 = 105,408 bytes a block, two an SM).
#include "cp_async.cuh"
#include "cuda_util.cuh"
#include "stem_conv.h"

namespace {

constexpr int kK = 64, kTaps = 16, kRows = 5; // kRows: the input rows of 2 output rows
// sm_90 (H100, H200): 228 KB of shared memory an SM, 1 KB of it reserved for each resident block
constexpr int kSmemPerSm = 228 * 1024, kBlocksPerSm = 2, kBlockSmemMax = kSmemPerSm / kBlocksPerSm - 1024;

template <int Hs, int Q> struct Shape {
    static_assert(Hs == Q + 3 && Q % 2 == 0, "a 4x4 unpadded convolution, output rows in pairs");
    static constexpr int kWarps = (Q + 15) / 16, kThreads = kWarps * 32;
    static constexpr int kCols = Hs > kWarps * 16 + 3 ? Hs : kWarps * 16 + 3;
    static constexpr int kInBytes = kRows * kCols * 32, kWBytes = kTaps * kK * 32;
    static constexpr int kStage = 2 * kInBytes + kWBytes + kWarps * 2 * 16 * 128 <= kBlockSmemMax ? 2 : 1;
    static constexpr int kOutBytes = kWarps * kStage * 16 * 128;
    static constexpr int kSmem = 2 * kInBytes + kWBytes + kOutBytes;
    static_assert(kSmem <= kBlockSmemMax, "two blocks an SM");
    static constexpr int kUnitsPerImage = Q / 2;
    // taps unrolled in the main loop: 4 where a thread has 128 registers (7 warps, 2 blocks an SM);
    // 2 at 10 warps (96 registers: ptxas spills 8 bytes, both outside the tap loop; 4 spilled 44)
    static constexpr int kTapUnroll = kThreads * kBlocksPerSm <= 512 ? 4 : 2;
};

__device__ __forceinline__ int swz(int row, int half) { return half ^ ((row >> 2) & 1); }

__device__ __forceinline__ void ldsm4(uint32_t r[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The 5 input rows of unit u (image u / (Q/2), output rows 2 (u % (Q/2)), + 1) into buffer in:
// columns 0 .. Hs - 1 of each (the pad columns past them untouched).
template <int Hs, int Q> __device__ __forceinline__ void load_unit(char *in, const __nv_bfloat16 *xs, int u) {
    using Sh = Shape<Hs, Q>;
    const int n = u / Sh::kUnitsPerImage, p0 = 2 * (u % Sh::kUnitsPerImage);
    const __nv_bfloat16 *src = xs + ((size_t)n * Hs + p0) * Hs * 16;
    for (int i = threadIdx.x; i < kRows * Hs * 2; i += Sh::kThreads) {
        const int rc = i >> 1, half = i & 1, col = rc % Hs; // (rc: row * Hs + column)
        const int at = Sh::kCols == Hs ? rc : rc + rc / Hs * (Sh::kCols - Hs);
        tk_cp16(in + at * 32 + swz(col, half) * 16, src + (size_t)rc * 16 + half * 8);
    }
}

template <int Hs, int Q>
__global__ void __launch_bounds__(Shape<Hs, Q>::kThreads, kBlocksPerSm)
    stem_fwd(const __nv_bfloat16 *__restrict__ xs, const __nv_bfloat16 *__restrict__ ws, int units,
             __nv_bfloat16 *__restrict__ y) {
    using Sh = Shape<Hs, Q>;
    extern __shared__ __align__(128) char sm[];
    char *inb = sm, *wsm = sm + 2 * Sh::kInBytes, *outb = wsm + Sh::kWBytes;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int u0 = (int)((int64_t)blockIdx.x * units / gridDim.x), u1 = (int)((int64_t)(blockIdx.x + 1) * units / gridDim.x);
    if (u0 >= u1) return;
    // the filter: ws[k][tap][c] -> w[tap][k]
    for (int i = threadIdx.x; i < kK * kTaps * 2; i += Sh::kThreads) {
        const int k = i / (kTaps * 2), tap = i / 2 % kTaps, half = i & 1;
        tk_cp16(wsm + (tap * kK + k) * 32 + swz(k, half) * 16, ws + (size_t)i * 8);
    }
    load_unit<Hs, Q>(inb, xs, u0);
    tk_cp_commit();
    if constexpr (Sh::kCols > Hs) // the pad columns of both buffers, zero (visible after the first barrier)
        for (int i = threadIdx.x; i < 2 * kRows * (Sh::kCols - Hs) * 2; i += Sh::kThreads) {
            const int br = i / ((Sh::kCols - Hs) * 2), rest = i % ((Sh::kCols - Hs) * 2);
            char *at = inb + (br * Sh::kCols + Hs + rest / 2) * 32 + (rest & 1) * 16;
            *reinterpret_cast<uint4 *>(at) = make_uint4(0, 0, 0, 0);
        }
    // this lane's ldmatrix rows: A (pixel of the warp's 16, channel half), B (channel of an n-tile pair, half)
    const int apx = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, ahalf = lane >> 4;
    const int bn = (lane & 7) + (lane >> 4) * 8, bhalf = (lane >> 3) & 1;
    const uint32_t wbase = tk_smem_u32(wsm);
    char *ob = outb + warp * Sh::kStage * 16 * 128;
    for (int u = u0, k = 0; u < u1; u++, k ^= 1) {
        if (u + 1 < u1) load_unit<Hs, Q>(inb + (k ^ 1) * Sh::kInBytes, xs, u + 1);
        tk_cp_commit();
        tk_cp_wait<1>();
        __syncthreads();
        const uint32_t ibase = tk_smem_u32(inb + k * Sh::kInBytes);
        float acc[2][8][4];
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int j = 0; j < 8; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[r][j][e] = 0.0f;
#pragma unroll Sh::kTapUnroll
        for (int tap = 0; tap < kTaps; tap++) {
            const int qy = tap >> 2, qx = tap & 3, col = apx + qx;
            uint32_t a[2][4];
#pragma unroll
            for (int r = 0; r < 2; r++)
                ldsm4(a[r], ibase + ((r + qy) * Sh::kCols + col) * 32 + swz(col, ahalf) * 16);
#pragma unroll
            for (int jp = 0; jp < 4; jp++) {
                const int n = jp * 16 + bn;
                uint32_t b[4];
                ldsm4(b, wbase + (tap * kK + n) * 32 + swz(n, bhalf) * 16);
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    mma16816(acc[r][2 * jp], a[r], b[0], b[1]);
                    mma16816(acc[r][2 * jp + 1], a[r], b[2], b[3]);
                }
            }
        }
        // out: the warp's 2 x 16 pixels as bf16 through shared memory, Stage rows at a time (row
        // r's pixel x at 16 (r % Stage) + x); pixels at Q and past (the last warp's, Q % 16 != 0) not stored
        const int n = u / Sh::kUnitsPerImage, p0 = 2 * (u % Sh::kUnitsPerImage);
#pragma unroll
        for (int r0 = 0; r0 < 2; r0 += Sh::kStage) {
            if (r0) __syncwarp(); // (the previous row's reads of ob done)
#pragma unroll
            for (int r = r0; r < r0 + Sh::kStage; r++)
#pragma unroll
                for (int j = 0; j < 8; j++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int px = (r - r0) * 16 + (lane >> 2) + h * 8;
                        __nv_bfloat162 v = __floats2bfloat162_rn(acc[r][j][2 * h], acc[r][j][2 * h + 1]);
                        *reinterpret_cast<__nv_bfloat162 *>(ob + px * 128 + ((j ^ (px & 7)) * 16) + (lane & 3) * 4) = v;
                    }
            __syncwarp();
#pragma unroll
            for (int i = 0; i < 4 * Sh::kStage; i++) { // 16 Stage pixels x 8 chunks, 4 pixels an instruction
                const int px = i * 4 + (lane >> 3), c = lane & 7, r = r0 + (px >> 4), q = warp * 16 + (px & 15);
                if (Q % 16 == 0 || q < Q) {
                    const uint4 v = *reinterpret_cast<const uint4 *>(ob + px * 128 + ((c ^ (px & 7)) * 16));
                    const size_t o = (((size_t)n * Q + p0 + r) * Q + q) * kK + c * 8;
                    *reinterpret_cast<uint4 *>(y + o) = v;
                }
            }
        }
        __syncthreads(); // (buffer k is copied into again two units on; ob written again)
    }
    tk_cp_wait<0>();
}

int sm_count() {
    static int n = 0;
    if (!n) {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess)
            n = v;
        else
            n = 132;
    }
    return n;
}

template <int Hs, int Q> int launch(tk_ctx *c, const void *xs, int N, const void *ws, void *y, tk_err *e) {
    using Sh = Shape<Hs, Q>;
    static bool attr = false;
    if (!attr) {
        cudaError_t st = cudaFuncSetAttribute(stem_fwd<Hs, Q>, cudaFuncAttributeMaxDynamicSharedMemorySize, Sh::kSmem);
        if (st != cudaSuccess) return tk_cu_check(e, "stem_conv (shared memory)", st);
        attr = true;
    }
    const int units = N * Sh::kUnitsPerImage, most = kBlocksPerSm * sm_count(), grid = units < most ? units : most;
    stem_fwd<Hs, Q><<<grid, Sh::kThreads, Sh::kSmem, tk_cu_stream(c)>>>(
        (const __nv_bfloat16 *)xs, (const __nv_bfloat16 *)ws, units, (__nv_bfloat16 *)y);
    return tk_cu_check(e, "stem_conv_fwd");
}

} // namespace

int tk_stem_conv_fwd_cuda(tk_ctx *c, const void *xs, int N, int S, const void *ws, int K, void *y, tk_err *e) {
    if (!tk_stem_conv_ok(TK_BF16, S, K) || N < 1)
        return tk_err_set(e, TK_EINTERNAL, "stem_conv: unsupported shape N %d S %d K %d", N, S, K);
    return S == 224 ? launch<115, 112>(c, xs, N, ws, y, e) : launch<153, 150>(c, xs, N, ws, y, e);
}

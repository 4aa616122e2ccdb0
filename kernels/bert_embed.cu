// CUDA side of kernels/bert_embed.h. Forward: one thread per (token, 8 features). Backward: the
// word table's rows by a stable radix sort of (id, token) and one block per run of equal ids
// summing its tokens in order (fp64; 16-byte loads where the rows allow); positions by one thread per (position, feature) over the
// sequences; token types by fixed chunks of tokens (fp64 partials) added in order.
#include <cub/cub.cuh>

#include "act_types.cuh"
#include "bert_embed.h"

namespace {

constexpr int kChunk = 256; // tokens a partial of the token type gradient sums

template <typename W, typename A>
__global__ void embed_fwd(int64_t n, int L, int H, const int32_t *ids, const uint8_t *seg, const W *word, const W *pos,
                          const W *type, A *out) {
    const size_t total = (size_t)n * H;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int64_t t = (int64_t)(i / H);
        int h = (int)(i % H);
        float v = tk_ld(word, (size_t)ids[t] * H + h) + tk_ld(pos, (size_t)(t % L) * H + h) +
                  tk_ld(type, (size_t)seg[t] * H + h);
        tk_st(out, i, v);
    }
}

struct Ws {
    int32_t *keys_in, *keys_out, *tok_in, *tok_out;
    double *part;
    void *temp;
    size_t temp_bytes, total;
};

Ws layout(void *base, int64_t n, int H, int T) {
    Ws l = {};
    size_t temp = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, temp, (int32_t *)nullptr, (int32_t *)nullptr, (int32_t *)nullptr,
                                    (int32_t *)nullptr, (int)n, 0, 32);
    char *p = (char *)base;
    size_t off = 0;
    l.keys_in = (int32_t *)(p + off), off += tk_cu_align(4 * (size_t)n);
    l.keys_out = (int32_t *)(p + off), off += tk_cu_align(4 * (size_t)n);
    l.tok_in = (int32_t *)(p + off), off += tk_cu_align(4 * (size_t)n);
    l.tok_out = (int32_t *)(p + off), off += tk_cu_align(4 * (size_t)n);
    l.part = (double *)(p + off), off += tk_cu_align(8 * (size_t)((n + kChunk - 1) / kChunk) * T * H);
    l.temp = p + off, l.temp_bytes = temp, off += tk_cu_align(temp);
    l.total = off;
    return l;
}

constexpr int32_t kPadKey = INT32_MAX; // the sort key of a padding token: after every id, in no run

// The tokens' numbers and sort keys: the id, or kPadKey past the sequence's length.
__global__ void keys_of(int64_t n, int L, const int32_t *ids, const int32_t *len, int32_t *keys, int32_t *x) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        x[i] = (int32_t)i;
        keys[i] = len && i % L >= len[i / L] ? kPadKey : ids[i];
    }
}

// Block k handles the run starting at sorted position k (others return at once).
template <typename A>
__global__ void word_runs(int64_t n, int H, const int32_t *keys, const int32_t *tok, const A *de, float *dword) {
    int64_t k = blockIdx.x;
    if ((k > 0 && keys[k] == keys[k - 1]) || keys[k] == kPadKey) return;
    int64_t end = k + 1;
    while (end < n && keys[end] == keys[k]) end++;
    float *row = dword + (size_t)keys[k] * H;
    for (int h = threadIdx.x; h < H; h += blockDim.x) {
        double s = 0;
        for (int64_t j = k; j < end; j++) s += tk_ld(de, (size_t)tok[j] * H + h);
        row[h] = (float)((double)row[h] + s);
    }
}

// The same, 8 features a thread with 16-byte loads (H % 8 == 0, de and dword 16-byte aligned),
// the run's rows 4 at a time in flight: the sums in the same order (tokens in sorted order, fp64),
// so the results are those of word_runs bit for bit. [MASK] makes one run of ~3% of the tokens,
// which the scalar kernel walked one 2-byte load at a time.
template <typename A>
__global__ void word_runs8(int64_t n, int H, const int32_t *keys, const int32_t *tok, const A *de, float *dword) {
    int64_t k = blockIdx.x;
    if ((k > 0 && keys[k] == keys[k - 1]) || keys[k] == kPadKey) return;
    int64_t end = k + 1;
    while (end < n && keys[end] == keys[k]) end++;
    float *row = dword + (size_t)keys[k] * H;
    for (int h = threadIdx.x * 8; h < H; h += blockDim.x * 8) {
        double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t j = k;
        for (; j + 4 <= end; j += 4) {
            float v[4][8];
#pragma unroll
            for (int u = 0; u < 4; u++) tk_ld8(de + (size_t)tok[j + u] * H + h, v[u]);
#pragma unroll
            for (int u = 0; u < 4; u++)
#pragma unroll
                for (int q = 0; q < 8; q++) s[q] += v[u][q];
        }
        for (; j < end; j++) {
            float v[8];
            tk_ld8(de + (size_t)tok[j] * H + h, v);
#pragma unroll
            for (int q = 0; q < 8; q++) s[q] += v[q];
        }
        float o[8];
        tk_ld8(row + h, o);
#pragma unroll
        for (int q = 0; q < 8; q++) o[q] = (float)((double)o[q] + s[q]);
        tk_st8(row + h, o);
    }
}

template <typename A>
__global__ void pos_grad(int B, int L, int npos, int H, const A *de, float *dpos) {
    int64_t n = (int64_t)npos * H;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int l = (int)(i / H), h = (int)(i % H);
        double s = 0;
        for (int b = 0; b < B && l < L; b++) s += tk_ld(de, ((size_t)b * L + l) * H + h);
        dpos[i] = (float)s;
    }
}

template <typename A>
__global__ void type_part(int64_t n, int H, int T, const uint8_t *seg, const A *de, double *part) {
    int h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h >= H) return;
    int64_t t0 = (int64_t)blockIdx.y * kChunk, t1 = t0 + kChunk < n ? t0 + kChunk : n;
    double s[TK_BERT_MAX_TYPES] = {0, 0, 0, 0};
    for (int64_t t = t0; t < t1; t++) s[seg[t]] += tk_ld(de, (size_t)t * H + h);
    for (int k = 0; k < T; k++) part[((size_t)blockIdx.y * T + k) * H + h] = s[k];
}

__global__ void type_finish(int chunks, int H, int T, const double *part, float *dtype) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= T * H) return;
    double s = 0;
    for (int c = 0; c < chunks; c++) s += part[(size_t)c * T * H + i];
    dtype[i] = (float)s;
}

} // namespace

int tk_bert_embed_fwd_cuda(tk_ctx *c, tk_dtype wt, tk_dtype act, int B, int L, int H, const int32_t *ids,
                           const uint8_t *seg, const void *word, const void *pos, const void *type, void *e_out,
                           tk_err *e) {
    int64_t n = (int64_t)B * L;
    if (n == 0) return 0;
    if (wt != act) return tk_err_set(e, TK_EINTERNAL, "bert_embed_fwd: %s tables, %s activations", tk_dtype_name(wt),
                                     tk_dtype_name(act));
    TK_ACT_DISPATCH(act, "bert_embed_fwd", e,
                    embed_fwd<T, T><<<tk_cu_blocks(n * H, 256), 256, 0, tk_cu_stream(c)>>>(
                        n, L, H, ids, seg, (const T *)word, (const T *)pos, (const T *)type, (T *)e_out));
    return tk_cu_check(e, "bert_embed_fwd");
}

size_t tk_bert_embed_bwd_ws_bytes_cuda(int B, int L, int H, int T) {
    int64_t n = (int64_t)B * L;
    return layout(nullptr, n > 0 ? n : 1, H, T).total;
}

int tk_bert_embed_bwd_cuda(tk_ctx *c, tk_dtype act, int B, int L, int H, int ntypes, int npos, const int32_t *ids,
                           const uint8_t *seg, const int32_t *len, const void *de, float *dword, float *dpos,
                           float *dtype, void *ws, tk_err *e) {
    const int nt = ntypes; // (T names the activation type below)
    if (nt < 1 || nt > TK_BERT_MAX_TYPES || npos < L)
        return tk_err_set(e, TK_EINTERNAL, "bert_embed_bwd: %d types, %d positions for L %d", nt, npos, L);
    int64_t n = (int64_t)B * L;
    if (n == 0) return 0;
    cudaStream_t s = tk_cu_stream(c);
    Ws l = layout(ws, n, H, nt);
    int chunks = (int)((n + kChunk - 1) / kChunk);
    keys_of<<<tk_cu_blocks(n, 256), 256, 0, s>>>(n, L, ids, len, l.keys_in, l.tok_in);
    TRY(tk_cu_check(e, "bert_embed_bwd", cub::DeviceRadixSort::SortPairs(l.temp, l.temp_bytes, l.keys_in, l.keys_out, l.tok_in,
                                                                         l.tok_out, (int)n, 0, 32, s)));
    TK_ACT_DISPATCH(act, "bert_embed_bwd", e, {
        if (H % 8 == 0 && tk_aligned16(de) && tk_aligned16(dword))
            word_runs8<T><<<(unsigned)n, 128, 0, s>>>(n, H, l.keys_out, l.tok_out, (const T *)de, dword);
        else
            word_runs<T><<<(unsigned)n, 128, 0, s>>>(n, H, l.keys_out, l.tok_out, (const T *)de, dword);
        pos_grad<T><<<tk_cu_blocks((int64_t)npos * H, 256), 256, 0, s>>>(B, L, npos, H, (const T *)de, dpos);
        type_part<T><<<dim3((H + 127) / 128, chunks), 128, 0, s>>>(n, H, nt, seg, (const T *)de, l.part);
    });
    type_finish<<<(nt * H + 255) / 256, 256, 0, s>>>(chunks, H, nt, l.part, dtype);
    return tk_cu_check(e, "bert_embed_bwd");
}

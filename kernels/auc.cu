// CUDA side of kernels/auc.h: exact ROC AUC, sort-based, on the device.
//
// Each sample becomes the reference's sort key (the score's bits mapped to an unsigned integer
// that orders like the float, -0 made +0, shifted left once, label in bit 0); a radix sort over
// those 33 bits puts equal scores together, negatives first. For a positive at sorted position
// i in a group of equal scores starting at s, with nb(x) = the number of negatives before x:
//   negatives below its score = nb(s), negatives tied with it = nb(i) - nb(s)
// so twice its contribution to the Mann-Whitney sum is nb(s) + nb(i), an integer. The sum is
// formed in integers and divided once, in fp64: the reference's value exactly.
// A NaN score makes the result NaN (the reference reports TK_ENUMERIC; an op inside a captured
// graph cannot return it).
#include <climits>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>

#include "auc.h"
#include "cuda_util.cuh"

constexpr int kKeyBits = 33;

struct MaxOp {
    __device__ __forceinline__ uint32_t operator()(uint32_t a, uint32_t b) const { return a > b ? a : b; }
};

struct AucWs {
    uint64_t *keys_in, *keys_out, *twice; // twice: 2 x contribution per sample (aliases keys_in)
    uint32_t *neg, *nb, *start, *sidx;    // neg and start alias one array
    unsigned long long *sum;              // device scalars: the integer sum
    int *nan;
    void *temp;
    size_t temp_bytes, total;
};

static AucWs auc_layout(void *base, int n) {
    AucWs l = {};
    size_t t1 = 0, t2 = 0, t3 = 0, t4 = 0;
    cub::DeviceRadixSort::SortKeys(nullptr, t1, (uint64_t *)nullptr, (uint64_t *)nullptr, n, 0, kKeyBits);
    cub::DeviceScan::ExclusiveSum(nullptr, t2, (uint32_t *)nullptr, (uint32_t *)nullptr, n);
    cub::DeviceScan::InclusiveScan(nullptr, t3, (uint32_t *)nullptr, (uint32_t *)nullptr, MaxOp(), n);
    cub::DeviceReduce::Sum(nullptr, t4, (uint64_t *)nullptr, (unsigned long long *)nullptr, n);
    size_t temp = t1 > t2 ? t1 : t2;
    temp = temp > t3 ? temp : t3;
    temp = temp > t4 ? temp : t4;
    char *p = (char *)base;
    size_t off = 0;
    l.keys_in = (uint64_t *)(p + off), off += tk_cu_align(8 * (size_t)n);
    l.keys_out = (uint64_t *)(p + off), off += tk_cu_align(8 * (size_t)n);
    l.twice = l.keys_in; // free once sorted
    l.neg = (uint32_t *)(p + off), off += tk_cu_align(4 * (size_t)n);
    l.start = l.neg;     // free once scanned
    l.nb = (uint32_t *)(p + off), off += tk_cu_align(4 * (size_t)n);
    l.sidx = (uint32_t *)(p + off), off += tk_cu_align(4 * (size_t)n);
    l.sum = (unsigned long long *)(p + off), off += 256;
    l.nan = (int *)(p + off), off += 256;
    l.temp = p + off, l.temp_bytes = temp, off += tk_cu_align(temp);
    l.total = off;
    return l;
}

size_t tk_auc_ws_bytes_cuda(int64_t n) { return auc_layout(nullptr, n > 0 && n <= INT_MAX ? (int)n : 1).total; }

__global__ static void auc_keys(const float *score, const uint8_t *label, int n, uint64_t *keys, int *nan) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float s = score[i];
        if (s != s) *nan = 1;
        if (s == 0) s = 0; // -0 -> +0: equal scores must tie
        uint32_t u = __float_as_uint(s);
        u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
        keys[i] = (uint64_t)u << 1 | (label[i] ? 1u : 0u);
    }
}

// neg[i] = sorted sample i is a negative; start[i] = i where a group of equal scores begins
// (the max-scan spreads it over the group). start aliases neg, so this runs after the sum of neg.
__global__ static void auc_negs(const uint64_t *k, int n, uint32_t *neg) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) neg[i] = !(k[i] & 1);
}
__global__ static void auc_starts(const uint64_t *k, int n, uint32_t *start) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        start[i] = i == 0 || (k[i] >> 1) != (k[i - 1] >> 1) ? (uint32_t)i : 0u;
}
__global__ static void auc_twice(const uint64_t *k, const uint32_t *nb, const uint32_t *sidx, int n, uint64_t *twice) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        twice[i] = (k[i] & 1) ? (uint64_t)nb[sidx[i]] + nb[i] : 0;
}
__global__ static void auc_nan(double *auc) { *auc = __longlong_as_double(0x7ff8000000000000ll); }
__global__ static void auc_final(const uint64_t *k, const uint32_t *nb, int n, const unsigned long long *sum,
                                 const int *nan, double *auc) {
    double negs = (double)nb[n - 1] + !(k[n - 1] & 1), pos = (double)n - negs;
    // Both factors and the sum are integers below 2^53: exact in fp64, one rounding in the division.
    *auc = *nan || pos == 0 || negs == 0 ? __longlong_as_double(0x7ff8000000000000ll)
                                          : ((double)*sum * 0.5) / (pos * negs);
}

int tk_auc_cuda(tk_ctx *c, const float *score, const uint8_t *label, int64_t n64, void *ws,
                double *auc, tk_err *e) {
    if (n64 > INT_MAX) return tk_err_set(e, TK_EINTERNAL, "auc: %lld samples (at most %d)", (long long)n64, INT_MAX);
    cudaStream_t s = tk_cu_stream(c);
    if (n64 <= 0) {
        auc_nan<<<1, 1, 0, s>>>(auc);
        return tk_cu_check(e, "auc");
    }
    int n = (int)n64;
    AucWs l = auc_layout(ws, n);
    unsigned g = tk_cu_blocks(n, 256);
    TRY(tk_cu_check(e, "auc", cudaMemsetAsync(l.nan, 0, sizeof(int), s)));
    auc_keys<<<g, 256, 0, s>>>(score, label, n, l.keys_in, l.nan);
    TRY(tk_cu_check(e, "auc (keys)"));
    TRY(tk_cu_check(e, "auc (sort)",
                    cub::DeviceRadixSort::SortKeys(l.temp, l.temp_bytes, l.keys_in, l.keys_out, n, 0, kKeyBits, s)));
    auc_negs<<<g, 256, 0, s>>>(l.keys_out, n, l.neg);
    TRY(tk_cu_check(e, "auc (negatives)"));
    TRY(tk_cu_check(e, "auc (scan)", cub::DeviceScan::ExclusiveSum(l.temp, l.temp_bytes, l.neg, l.nb, n, s)));
    auc_starts<<<g, 256, 0, s>>>(l.keys_out, n, l.start);
    TRY(tk_cu_check(e, "auc (groups)"));
    TRY(tk_cu_check(e, "auc (group scan)",
                    cub::DeviceScan::InclusiveScan(l.temp, l.temp_bytes, l.start, l.sidx, MaxOp(), n, s)));
    auc_twice<<<g, 256, 0, s>>>(l.keys_out, l.nb, l.sidx, n, l.twice);
    TRY(tk_cu_check(e, "auc (contributions)"));
    TRY(tk_cu_check(e, "auc (sum)", cub::DeviceReduce::Sum(l.temp, l.temp_bytes, l.twice, l.sum, n, s)));
    auc_final<<<1, 1, 0, s>>>(l.keys_out, l.nb, n, l.sum, l.nan, auc);
    return tk_cu_check(e, "auc (final)");
}

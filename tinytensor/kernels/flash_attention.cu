// Fused attention (FlashAttention-2), fp32, for CuPy RawModule and the CPU executor.
//
// The NumPy twin, tinytensor/ops/attention_tiled.py, is the specification: same tiling, same
// online softmax, same saved L = m + log l (+inf on rows that see no key). Layout (contiguous):
//   q, o, dO, dQ: (B·Hq, Nq, d)   k, v, dK, dV: (B·Hkv, Nk, d)   L, D: (B·Hq, Nq)
//   bias: float, mask: uint8 (1 = attend), both indexed (b, h, i, j) with the element strides
//   strides[0..3] (bias) and strides[4..7] (mask); a stride of 0 broadcasts that axis.
//   key_lengths: (B,) int32: key j of batch b is padding iff j >= key_lengths[b].
//   causal: query i sees key j iff j <= i + Nk - Nq (bottom-right alignment).
// Tiles: 32 queries x 32 keys, 128 threads = 4 warps; a warp owns 8 rows, lane = key (scores)
// or lane = column c, c + 32, c + 64, c + 96 (outputs), so head dims up to 128. Shared memory is
// dynamic, sized by d by the launch code (tinytensor/kernels/flash_attention.py).
//
// NOTE: NVRTC has no host headers (no INFINITY, no <cmath>): +inf is spelled as its bit pattern.
// NOTE: every __syncthreads() is reached by all threads: rows and keys past the end are masked,
// never skipped by an early return.

#ifndef TT_DYNAMIC_SHARED
#define TT_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

#define TILE_Q 32
#define TILE_K 32
#define THREADS 128
#define ROWS_PER_WARP (TILE_Q / (THREADS / 32))
#define MAX_D 128
#define COLS_PER_LANE (MAX_D / 32)
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float positive_inf() { return __int_as_float(0x7f800000); }

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x = fmaxf(x, __shfl_xor_sync(FULL_MASK, x, offset));
  return x;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(FULL_MASK, x, offset);
  return x;
}

// Which (query i, key j) pairs count, and the additive bias, for one (batch b, query head h).
struct Masking {
  const float* bias;
  const unsigned char* mask;
  const long long* strides;
  int has_bias, has_mask, causal, n_valid_keys, diagonal;
  long long bias_base, mask_base;

  __device__ void init(const float* bias_, int has_bias_, const unsigned char* mask_, int has_mask_,
                       const long long* strides_, const int* key_lengths, int has_lengths,
                       int causal_, int n_q, int n_k, int b, int h) {
    bias = bias_; mask = mask_; strides = strides_;
    has_bias = has_bias_; has_mask = has_mask_; causal = causal_;
    n_valid_keys = n_k;
    if (has_lengths) n_valid_keys = min(n_k, max(0, key_lengths[b]));
    diagonal = n_k - n_q;
    bias_base = has_bias ? b * strides[0] + h * strides[1] : 0;
    mask_base = has_mask ? b * strides[4] + h * strides[5] : 0;
  }
  __device__ bool allowed(int i, int j) const {
    if (j >= n_valid_keys) return false;
    if (causal && j > i + diagonal) return false;
    if (has_mask && !mask[mask_base + i * strides[6] + j * strides[7]]) return false;
    return true;
  }
  __device__ float bias_at(int i, int j) const {
    return has_bias ? bias[bias_base + i * strides[2] + j * strides[3]] : 0.0f;
  }
};

// Loads rows [row0, row0 + rows) of a (n, d) matrix into shared memory with row pitch `pitch`;
// rows past n are zero.
__device__ __forceinline__ void load_tile(float* dst, const float* src, int row0, int rows, int n,
                                          int d, int pitch) {
  for (int e = threadIdx.x; e < rows * d; e += blockDim.x) {
    int r = e / d, c = e - r * d;
    dst[r * pitch + c] = (row0 + r < n) ? src[(long long)(row0 + r) * d + c] : 0.0f;
  }
}

// Forward: one block per (query tile, b·h). O = softmax(S)·V and L = logsumexp(S) per row.
// Shared: Q (32 x d), K (32 x (d+1)), V (32 x d), P (32 x 33).
extern "C" __global__ void __launch_bounds__(THREADS)
flash_attention_forward(const float* __restrict__ q, const float* __restrict__ k,
                        const float* __restrict__ v, const float* __restrict__ bias, int has_bias,
                        const unsigned char* __restrict__ mask, int has_mask,
                        const long long* __restrict__ strides, const int* __restrict__ key_lengths,
                        int has_lengths, float* __restrict__ out, float* __restrict__ lse, int n_q,
                        int n_k, int d, int heads_q, int groups, int causal, float scale) {
  TT_DYNAMIC_SHARED(float, smem);
  float* s_q = smem;
  float* s_k = s_q + TILE_Q * d;
  float* s_v = s_k + TILE_K * (d + 1);
  float* s_p = s_v + TILE_K * d;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int q0 = blockIdx.x * TILE_Q;
  const long long bh = blockIdx.y;
  const int b = (int)(bh / heads_q), h = (int)(bh % heads_q);
  const long long bh_kv = (long long)b * (heads_q / groups) + h / groups;
  const float* q_bh = q + bh * n_q * d;
  const float* k_bh = k + bh_kv * n_k * d;
  const float* v_bh = v + bh_kv * n_k * d;
  Masking masking;
  masking.init(bias, has_bias, mask, has_mask, strides, key_lengths, has_lengths, causal, n_q, n_k,
               b, h);

  load_tile(s_q, q_bh, q0, TILE_Q, n_q, d, d);
  float m[ROWS_PER_WARP], l[ROWS_PER_WARP], acc[ROWS_PER_WARP][COLS_PER_LANE];
#pragma unroll
  for (int r = 0; r < ROWS_PER_WARP; ++r) {
    m[r] = -positive_inf();
    l[r] = 0.0f;
#pragma unroll
    for (int t = 0; t < COLS_PER_LANE; ++t) acc[r][t] = 0.0f;
  }
  int key_end = masking.n_valid_keys;
  if (causal) key_end = min(key_end, max(0, q0 + TILE_Q + masking.diagonal));
  __syncthreads();

  for (int k0 = 0; k0 < key_end; k0 += TILE_K) {
    load_tile(s_k, k_bh, k0, TILE_K, n_k, d, d + 1);
    load_tile(s_v, v_bh, k0, TILE_K, n_k, d, d);
    __syncthreads();
    const int j = k0 + lane;
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; ++r) {
      const int row = warp * ROWS_PER_WARP + r, i = q0 + row;
      float s = -positive_inf();
      if (i < n_q && masking.allowed(i, j)) {
        float dot = 0.0f;
        for (int c = 0; c < d; ++c) dot += s_q[row * d + c] * s_k[lane * (d + 1) + c];
        s = dot * scale + masking.bias_at(i, j);
      }
      const float m_new = fmaxf(m[r], warp_max(s));
      // NOTE: a row that has seen only masked keys has max -inf: shift by 0, not by -inf.
      const float m_safe = (m_new == -positive_inf()) ? 0.0f : m_new;
      const float p = expf(s - m_safe);
      const float alpha = expf(m[r] - m_safe);
      l[r] = l[r] * alpha + warp_sum(p);
      m[r] = m_new;
#pragma unroll
      for (int t = 0; t < COLS_PER_LANE; ++t) acc[r][t] *= alpha;
      s_p[row * (TILE_K + 1) + lane] = p;
    }
    __syncwarp();
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; ++r) {
      const int row = warp * ROWS_PER_WARP + r;
      for (int jj = 0; jj < TILE_K; ++jj) {
        const float p = s_p[row * (TILE_K + 1) + jj];
#pragma unroll
        for (int t = 0; t < COLS_PER_LANE; ++t) {
          const int c = lane + 32 * t;
          if (c < d) acc[r][t] += p * s_v[jj * d + c];
        }
      }
    }
    __syncthreads();  // the next tile overwrites s_k, s_v and s_p
  }

#pragma unroll
  for (int r = 0; r < ROWS_PER_WARP; ++r) {
    const int i = q0 + warp * ROWS_PER_WARP + r;
    if (i >= n_q) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
#pragma unroll
    for (int t = 0; t < COLS_PER_LANE; ++t) {
      const int c = lane + 32 * t;
      if (c < d) out[(bh * n_q + i) * d + c] = acc[r][t] * inv;
    }
    if (lane == 0) lse[bh * n_q + i] = l[r] > 0.0f ? m[r] + logf(l[r]) : positive_inf();
  }
}

// Backward, step 1: D = rowsum(dO ∘ O), one warp per row (rows = B·Hq·Nq).
extern "C" __global__ void __launch_bounds__(THREADS)
flash_attention_backward_delta(const float* __restrict__ out, const float* __restrict__ grad_out,
                               float* __restrict__ delta, long long rows, int d) {
  const long long row = (long long)blockIdx.x * (THREADS / 32) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  float sum = 0.0f;
  if (row < rows)
    for (int c = lane; c < d; c += 32) sum += out[row * d + c] * grad_out[row * d + c];
  sum = warp_sum(sum);
  if (row < rows && lane == 0) delta[row] = sum;
}

// Backward, step 2: one block per (key tile, b·Hkv) accumulates dK and dV over every query tile
// of every query head in its GQA group, so no two blocks write one element (no atomics).
// Shared: K, V (32 x (d+1)), Q, dO (32 x (d+1)), L, D (32), P, dS stored transposed (32 x 33).
extern "C" __global__ void __launch_bounds__(THREADS)
flash_attention_backward_dkdv(const float* __restrict__ q, const float* __restrict__ k,
                              const float* __restrict__ v, const float* __restrict__ bias,
                              int has_bias, const unsigned char* __restrict__ mask, int has_mask,
                              const long long* __restrict__ strides,
                              const int* __restrict__ key_lengths, int has_lengths,
                              const float* __restrict__ grad_out, const float* __restrict__ lse,
                              const float* __restrict__ delta, float* __restrict__ grad_k,
                              float* __restrict__ grad_v, int n_q, int n_k, int d, int heads_q,
                              int groups, int causal, float scale) {
  TT_DYNAMIC_SHARED(float, smem);
  const int pitch = d + 1;
  float* s_k = smem;
  float* s_v = s_k + TILE_K * pitch;
  float* s_q = s_v + TILE_K * pitch;
  float* s_do = s_q + TILE_Q * pitch;
  float* s_lse = s_do + TILE_Q * pitch;
  float* s_delta = s_lse + TILE_Q;
  float* s_pt = s_delta + TILE_Q;           // P transposed: [key][query]
  float* s_dst = s_pt + TILE_K * (TILE_Q + 1);  // dS transposed
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int k0 = blockIdx.x * TILE_K;
  const long long bh_kv = blockIdx.y;
  const int heads_kv = heads_q / groups;
  const int b = (int)(bh_kv / heads_kv), h_kv = (int)(bh_kv % heads_kv);

  load_tile(s_k, k + bh_kv * n_k * d, k0, TILE_K, n_k, d, pitch);
  load_tile(s_v, v + bh_kv * n_k * d, k0, TILE_K, n_k, d, pitch);
  float dk[ROWS_PER_WARP][COLS_PER_LANE], dv[ROWS_PER_WARP][COLS_PER_LANE];
#pragma unroll
  for (int r = 0; r < ROWS_PER_WARP; ++r)
#pragma unroll
    for (int t = 0; t < COLS_PER_LANE; ++t) dk[r][t] = dv[r][t] = 0.0f;

  for (int g = 0; g < groups; ++g) {
    const int h = h_kv * groups + g;
    const long long bh = (long long)b * heads_q + h;
    Masking masking;
    masking.init(bias, has_bias, mask, has_mask, strides, key_lengths, has_lengths, causal, n_q,
                 n_k, b, h);
    // the first query that may see key k0; keys past the valid ones give P = 0 everywhere
    int q_start = causal ? max(0, k0 - masking.diagonal) : 0;
    if (k0 >= masking.n_valid_keys) q_start = n_q;
    q_start = (q_start / TILE_Q) * TILE_Q;
    for (int q0 = q_start; q0 < n_q; q0 += TILE_Q) {
      __syncthreads();  // the previous tile's s_q, s_do, s_pt are no longer read
      load_tile(s_q, q + bh * n_q * d, q0, TILE_Q, n_q, d, pitch);
      load_tile(s_do, grad_out + bh * n_q * d, q0, TILE_Q, n_q, d, pitch);
      if (threadIdx.x < TILE_Q) {
        const int i = q0 + threadIdx.x;
        s_lse[threadIdx.x] = i < n_q ? lse[bh * n_q + i] : positive_inf();
        s_delta[threadIdx.x] = i < n_q ? delta[bh * n_q + i] : 0.0f;
      }
      __syncthreads();
      // lane = query row of the tile; the warp's 8 keys one after another
      const int i = q0 + lane;
#pragma unroll
      for (int r = 0; r < ROWS_PER_WARP; ++r) {
        const int key = warp * ROWS_PER_WARP + r, j = k0 + key;
        float p = 0.0f, ds = 0.0f;
        if (i < n_q && j < n_k && masking.allowed(i, j)) {
          float dot = 0.0f, dp = 0.0f;
          for (int c = 0; c < d; ++c) {
            dot += s_q[lane * pitch + c] * s_k[key * pitch + c];
            dp += s_do[lane * pitch + c] * s_v[key * pitch + c];
          }
          // NOTE: L = +inf on rows that see no key gives P = 0, never NaN.
          p = expf(dot * scale + masking.bias_at(i, j) - s_lse[lane]);
          ds = p * (dp - s_delta[lane]);
        }
        s_pt[key * (TILE_Q + 1) + lane] = p;
        s_dst[key * (TILE_Q + 1) + lane] = ds;
      }
      __syncwarp();
      // lane = column: dV += Pᵀ·dO, dK += dSᵀ·Q over the tile's 32 queries
#pragma unroll
      for (int r = 0; r < ROWS_PER_WARP; ++r) {
        const int key = warp * ROWS_PER_WARP + r;
        for (int qq = 0; qq < TILE_Q; ++qq) {
          const float p = s_pt[key * (TILE_Q + 1) + qq];
          const float ds = s_dst[key * (TILE_Q + 1) + qq];
#pragma unroll
          for (int t = 0; t < COLS_PER_LANE; ++t) {
            const int c = lane + 32 * t;
            if (c < d) {
              dv[r][t] += p * s_do[qq * pitch + c];
              dk[r][t] += ds * s_q[qq * pitch + c];
            }
          }
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < ROWS_PER_WARP; ++r) {
    const int j = k0 + warp * ROWS_PER_WARP + r;
    if (j >= n_k) continue;
#pragma unroll
    for (int t = 0; t < COLS_PER_LANE; ++t) {
      const int c = lane + 32 * t;
      if (c < d) {
        grad_k[(bh_kv * n_k + j) * d + c] = dk[r][t] * scale;
        grad_v[(bh_kv * n_k + j) * d + c] = dv[r][t];
      }
    }
  }
}

// Backward, step 3: one block per (query tile, b·Hq) accumulates dQ over the key tiles and, when
// write_ds is set, writes dS for every (i, j) to ds_out (B·Hq, Nq, Nk): the bias's gradient
// before the launch code sums it over the axes the bias was broadcast on.
// Shared: Q, dO (32 x d), K, V (32 x (d+1)), dS (32 x 33).
extern "C" __global__ void __launch_bounds__(THREADS)
flash_attention_backward_dq(const float* __restrict__ q, const float* __restrict__ k,
                            const float* __restrict__ v, const float* __restrict__ bias,
                            int has_bias, const unsigned char* __restrict__ mask, int has_mask,
                            const long long* __restrict__ strides,
                            const int* __restrict__ key_lengths, int has_lengths,
                            const float* __restrict__ grad_out, const float* __restrict__ lse,
                            const float* __restrict__ delta, float* __restrict__ grad_q,
                            float* __restrict__ ds_out, int write_ds, int n_q, int n_k, int d,
                            int heads_q, int groups, int causal, float scale) {
  TT_DYNAMIC_SHARED(float, smem);
  const int pitch = d + 1;
  float* s_q = smem;
  float* s_do = s_q + TILE_Q * d;
  float* s_k = s_do + TILE_Q * d;
  float* s_v = s_k + TILE_K * pitch;
  float* s_ds = s_v + TILE_K * pitch;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int q0 = blockIdx.x * TILE_Q;
  const long long bh = blockIdx.y;
  const int b = (int)(bh / heads_q), h = (int)(bh % heads_q);
  const long long bh_kv = (long long)b * (heads_q / groups) + h / groups;
  Masking masking;
  masking.init(bias, has_bias, mask, has_mask, strides, key_lengths, has_lengths, causal, n_q, n_k,
               b, h);

  load_tile(s_q, q + bh * n_q * d, q0, TILE_Q, n_q, d, d);
  load_tile(s_do, grad_out + bh * n_q * d, q0, TILE_Q, n_q, d, d);
  float row_lse[ROWS_PER_WARP], row_delta[ROWS_PER_WARP], dq[ROWS_PER_WARP][COLS_PER_LANE];
#pragma unroll
  for (int r = 0; r < ROWS_PER_WARP; ++r) {
    const int i = q0 + warp * ROWS_PER_WARP + r;
    row_lse[r] = i < n_q ? lse[bh * n_q + i] : positive_inf();
    row_delta[r] = i < n_q ? delta[bh * n_q + i] : 0.0f;
#pragma unroll
    for (int t = 0; t < COLS_PER_LANE; ++t) dq[r][t] = 0.0f;
  }
  // dS must be written everywhere (zeros where masked), so then every key tile is visited.
  int key_end = masking.n_valid_keys;
  if (causal) key_end = min(key_end, max(0, q0 + TILE_Q + masking.diagonal));
  if (write_ds) key_end = n_k;
  __syncthreads();

  for (int k0 = 0; k0 < key_end; k0 += TILE_K) {
    load_tile(s_k, k + bh_kv * n_k * d, k0, TILE_K, n_k, d, pitch);
    load_tile(s_v, v + bh_kv * n_k * d, k0, TILE_K, n_k, d, pitch);
    __syncthreads();
    const int j = k0 + lane;
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; ++r) {
      const int row = warp * ROWS_PER_WARP + r, i = q0 + row;
      float ds = 0.0f;
      if (i < n_q && j < n_k && masking.allowed(i, j)) {
        float dot = 0.0f, dp = 0.0f;
        for (int c = 0; c < d; ++c) {
          dot += s_q[row * d + c] * s_k[lane * pitch + c];
          dp += s_do[row * d + c] * s_v[lane * pitch + c];
        }
        const float p = expf(dot * scale + masking.bias_at(i, j) - row_lse[r]);
        ds = p * (dp - row_delta[r]);
      }
      if (write_ds && i < n_q && j < n_k) ds_out[(bh * n_q + i) * n_k + j] = ds;
      s_ds[row * (TILE_K + 1) + lane] = ds;
    }
    __syncwarp();
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; ++r) {
      const int row = warp * ROWS_PER_WARP + r;
      for (int jj = 0; jj < TILE_K; ++jj) {
        const float ds = s_ds[row * (TILE_K + 1) + jj];
#pragma unroll
        for (int t = 0; t < COLS_PER_LANE; ++t) {
          const int c = lane + 32 * t;
          if (c < d) dq[r][t] += ds * s_k[jj * pitch + c];
        }
      }
    }
    __syncthreads();  // the next tile overwrites s_k, s_v and s_ds
  }

#pragma unroll
  for (int r = 0; r < ROWS_PER_WARP; ++r) {
    const int i = q0 + warp * ROWS_PER_WARP + r;
    if (i >= n_q) continue;
#pragma unroll
    for (int t = 0; t < COLS_PER_LANE; ++t) {
      const int c = lane + 32 * t;
      if (c < d) grad_q[(bh * n_q + i) * d + c] = dq[r][t] * scale;
    }
  }
}

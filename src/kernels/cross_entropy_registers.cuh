#pragma once
// The register path of the softmax cross-entropy (kernels/cross_entropy.h) for V <= kMaxV: each row is
// read from HBM once. Each thread holds kQuads groups of four logits in registers, the block reduces the
// max and then the sum of exp(x - max), and each thread writes its dlogits from the exps it kept (one exp
// per element). Group q = i * threads + thread, so every load and store of a warp is contiguous.
// kQuads x 4 x 1024 threads = 32 floats per thread of the 64 registers a 1024-thread block allows.
// bf16 logits (the LM head's) take their own kernel: the row is copied into shared memory with 16-byte
// asynchronous copies and read from there three times (max, sum of exps, dlogits with the exps recomputed),
// so several rows run on an SM at once. The register layout holds one 1024-thread row per SM (32768 fp32
// logits fill half the register file), which leaves the SM idle through each row's load latency and block
// reductions; at bf16 that made it slower per byte than at fp32.
// Written over a launch policy (detail::CudaLaunch, or the CPU emulator of the tests).
#include <cmath>
#include <cstdint>

#include "kernels/common.cuh"
#if !defined(SG_SIMT_EMULATION)
#include <cuda_pipeline.h>
#endif
#include "kernels/cross_entropy.h"

namespace sg::kernels::cross_entropy_registers {
SG_EMULATED_NAMESPACE_BEGIN

inline constexpr int kQuads = 8;
inline constexpr int kMaxThreads = 1024;
inline constexpr int64_t kMaxV = int64_t{kMaxThreads} * kQuads * 4;
// bf16 path: the row in shared memory (64 KiB at kMaxV: 3 rows an SM). 512 threads for rows of at least
// kBf16WideRowVectors 16-byte vectors, 256 below: on the H200, 512 threads took a V = 32768 call from 151.2
// to 141.5 us (more warps hide the three passes' latency) but a V = 8192 one from 11.2 to 12.6 us.
inline constexpr int kBf16MaxThreads = 512;
inline constexpr int64_t kBf16WideRowVectors = 4096;
inline int bf16_row_threads(int64_t V) { return detail::ceil_div(V, 8) >= kBf16WideRowVectors ? kBf16MaxThreads : 256; }

struct Args {
  const void* logits = nullptr;  // float or bf16 (the kernel's LogitT)
  const int32_t* targets = nullptr;
  const float* loss_mask = nullptr;
  bf16* dlogits = nullptr;
  float* row_loss = nullptr;
  int V = 0;
  int64_t logits_stride = 0, dlogits_stride = 0;
  const float* token_count = nullptr;
  float loss_scale = 1.0f;
  bool vectorized = false;  // row starts aligned for four logits and four bf16 dlogits at a time
};

SG_DEVICE float load_logit(const float* row, int j) { return row[j]; }
SG_DEVICE float load_logit(const bf16* row, int j) { return __bfloat162float(row[j]); }

// Four fp32 logits from j (a multiple of 4) in one 16-byte access.
SG_DEVICE void load_logits4(const float* row, int j, float (&v)[4]) {
  const uint4 raw = detail::load_16_bytes(row + j);
  __builtin_memcpy(v, &raw, 16);
}
SG_DEVICE void store_dlogits4(bf16* row, int j, const float (&g)[4]) {
  const __nv_bfloat162 pairs[2] = {__floats2bfloat162_rn(g[0], g[1]), __floats2bfloat162_rn(g[2], g[3])};
#if defined(SG_SIMT_EMULATION)
  __builtin_memcpy(static_cast<void*>(row + j), pairs, 8);
#else
  uint2 raw;
  __builtin_memcpy(&raw, pairs, 8);
  *reinterpret_cast<uint2*>(row + j) = raw;
#endif
}

struct MaxOp {
  SG_DEVICE float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  SG_DEVICE float operator()(float a, float b) const { return a + b; }
};

// `op` over the block in a fixed order (a butterfly in each warp, then every warp the same butterfly over
// the warps' results), so every thread returns the same bits, run after run. The block is a multiple of
// 32 threads; `scratch` is 32 floats of shared memory, reusable by the next call.
template <class Op>
SG_DEVICE float block_all_reduce(float v, float identity, Op op, float* scratch) {
  const int lane = static_cast<int>(detail::lane_id()), warp = static_cast<int>(detail::warp_id());
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, detail::shfl_xor(v, offset));
  detail::block_sync();  // a previous call's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  detail::block_sync();
  v = lane < (detail::block_threads() >> 5) ? scratch[lane] : identity;
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, detail::shfl_xor(v, offset));
  return v;
}

// A row's mask and target, read while its logits load. A masked-out row's target is never read.
struct RowTarget {
  float mask;
  bool active;
  int32_t target;
  bool target_ok;  // in [0, V)
};
SG_DEVICE RowTarget read_row_target(const Args& a, int64_t row) {
  const float mask = a.loss_mask[row];
  const int32_t target = mask != 0.0f ? a.targets[row] : -1;
  return {.mask = mask, .active = mask != 0.0f, .target = target, .target_ok = target >= 0 && target < a.V};
}

// What both kernels do once a row's max and sum of exps are known: thread 0 writes the row's loss
// (mask * (logsumexp - logit[target]); 0 for a masked row, NaN for an active row whose target is outside
// [0, V)), and every thread gets the dlogits constants: dlogits = scale * (exp * inv_sum - onehot), with no
// onehot term for a target outside [0, V).
struct RowGradient {
  int onehot_col;
  float scale, inv_sum;
};
template <class LogitT>
SG_DEVICE RowGradient finish_row(const Args& a, int64_t row, const RowTarget& t, float row_max, float row_sum,
                                 const LogitT* x) {
  if (detail::thread_index() == 0) {
    float loss = 0.0f;
    if (t.active) loss = t.target_ok ? t.mask * (logf(row_sum) + row_max - load_logit(x, t.target)) : NAN;
    a.row_loss[row] = loss;
  }
  return {.onehot_col = (t.active && t.target_ok) ? t.target : -1,
          .scale = (a.loss_scale / fmaxf(*a.token_count, 1.0f)) * t.mask,
          .inv_sum = 1.0f / row_sum};
}

template <class LogitT>
SG_KERNEL(kMaxThreads) row_in_registers_kernel(Args a) {
  float* scratch = reinterpret_cast<float*>(detail::dynamic_smem());  // [32]
  const int64_t row = detail::block_index_x();
  const int threads = detail::block_threads(), V = a.V;
  const LogitT* x = static_cast<const LogitT*>(a.logits) + row * a.logits_stride;

  // Columns past V hold -inf: they add nothing to the max or the sum and are never stored.
  float e[kQuads][4];
SG_UNROLL
  for (int i = 0; i < kQuads; ++i) {
    const int j = (i * threads + detail::thread_index()) * 4;
    if (a.vectorized && j + 3 < V) {
      load_logits4(x, j, e[i]);
    } else {
SG_UNROLL
      for (int k = 0; k < 4; ++k) e[i][k] = j + k < V ? load_logit(x, j + k) : -INFINITY;
    }
  }
  const RowTarget t = read_row_target(a, row);

  float thread_max = -INFINITY;  // fmaxf skips NaN; a NaN logit poisons the sum below instead
SG_UNROLL
  for (int i = 0; i < kQuads; ++i)
SG_UNROLL
    for (int k = 0; k < 4; ++k) thread_max = fmaxf(thread_max, e[i][k]);
  const float row_max = block_all_reduce(thread_max, -INFINITY, MaxOp(), scratch);

  // The exps replace the logits; -inf logits (and the columns past V) give 0 even when row_max is -inf.
  float thread_sum = 0.0f;
SG_UNROLL
  for (int i = 0; i < kQuads; ++i) {
SG_UNROLL
    for (int k = 0; k < 4; ++k) e[i][k] = e[i][k] == -INFINITY ? 0.0f : expf(e[i][k] - row_max);
    thread_sum += (e[i][0] + e[i][1]) + (e[i][2] + e[i][3]);
  }
  const float row_sum = block_all_reduce(thread_sum, 0.0f, SumOp(), scratch);

  const RowGradient r = finish_row(a, row, t, row_max, row_sum, x);
  bf16* d = a.dlogits + row * a.dlogits_stride;
SG_UNROLL
  for (int i = 0; i < kQuads; ++i) {
    const int j = (i * threads + detail::thread_index()) * 4;
    float g[4];
SG_UNROLL
    for (int k = 0; k < 4; ++k) g[k] = r.scale * (e[i][k] * r.inv_sum - (j + k == r.onehot_col ? 1.0f : 0.0f));
    if (a.vectorized && j + 3 < V) {
      store_dlogits4(d, j, g);
    } else {
SG_UNROLL
      for (int k = 0; k < 4; ++k)
        if (j + k < V) d[j + k] = __float2bfloat16_rn(g[k]);
    }
  }
}

// A 16-byte copy from global to shared memory that does not pass through registers (cp.async), and the wait
// for all of a thread's copies. The emulator copies at once.
SG_DEVICE void copy_16_bytes_async(void* shared_dst, const void* global_src) {
#if defined(SG_SIMT_EMULATION)
  __builtin_memcpy(shared_dst, global_src, 16);
#else
  __pipeline_memcpy_async(shared_dst, global_src, 16);
#endif
}
SG_DEVICE void wait_async_copies() {
#if !defined(SG_SIMT_EMULATION)
  __pipeline_commit();
  __pipeline_wait_prior(0);
#endif
}

// Shared memory of the bf16 kernel: 32 floats of reduction scratch, then the row padded to whole vectors.
inline size_t bf16_row_smem_bytes(int64_t V) {
  return 32 * sizeof(float) + static_cast<size_t>(detail::ceil_div(V, 8) * 8) * sizeof(bf16);
}

// The bf16 twin of row_in_registers_kernel (same loss and dlogits formulas, same NaN and target rules).
// Vector q (logits [8q, 8q + 8)) belongs to thread q % threads. a.vectorized: 16-byte aligned rows.
SG_KERNEL(kBf16MaxThreads) row_in_shared_bf16_kernel(Args a) {
  float* scratch = reinterpret_cast<float*>(detail::dynamic_smem());  // [32]
  bf16* srow = reinterpret_cast<bf16*>(detail::dynamic_smem() + 32 * sizeof(float));
  const int64_t row = detail::block_index_x();
  const int threads = detail::block_threads(), tid = detail::thread_index(), V = a.V;
  const int vectors = static_cast<int>(detail::ceil_div(V, 8));
  const bf16* x = static_cast<const bf16*>(a.logits) + row * a.logits_stride;

  const RowTarget t = read_row_target(a, row);
  // Stage the row; columns [V, 8 * vectors) read as -inf.
  const int whole = a.vectorized ? V / 8 : 0;
  for (int q = tid; q < whole; q += threads) copy_16_bytes_async(srow + q * 8, x + q * 8);
  for (int j = whole * 8 + tid; j < vectors * 8; j += threads) srow[j] = j < V ? x[j] : __float2bfloat16_rn(-INFINITY);
  wait_async_copies();
  detail::block_sync();


  // The max of packed bf16 pairs (exact, and one instruction for two logits): the kernel is bound by its
  // ALU work, not by HBM. Like fmaxf, the pair max skips NaN; a NaN logit poisons the sum below instead.
  __nv_bfloat162 pair_max = __bfloat162bfloat162(__float2bfloat16_rn(-INFINITY));
  for (int q = tid; q < vectors; q += threads) {
    const uint4 raw = detail::load_16_bytes(srow + q * 8);
    __nv_bfloat162 p[4];
    __builtin_memcpy(static_cast<void*>(p), &raw, 16);
    pair_max = __hmax2(pair_max, __hmax2(__hmax2(p[0], p[1]), __hmax2(p[2], p[3])));
  }
  const float thread_max = fmaxf(__low2float(pair_max), __high2float(pair_max));
  const float row_max = block_all_reduce(thread_max, -INFINITY, MaxOp(), scratch);
  // exp(x - row_max) with the hardware exp2 (two instructions, a few ulp; expf's ALU work would bound the
  // kernel) and no per-logit test for -inf: exp(-inf) = 0 whenever row_max is not -inf, and a row whose max
  // is -inf is shifted by 0, so its -inf logits (the padding columns too) still give 0.
  const float shift = row_max == -INFINITY ? 0.0f : row_max;

  float thread_sum = 0.0f;
  for (int q = tid; q < vectors; q += threads) {
    float f[8];
    detail::load_bf16<8>(srow + q * 8, f);
SG_UNROLL
    for (int k = 0; k < 8; ++k) f[k] = detail::fast_exp(f[k] - shift);
    thread_sum += ((f[0] + f[1]) + (f[2] + f[3])) + ((f[4] + f[5]) + (f[6] + f[7]));
  }
  const float row_sum = block_all_reduce(thread_sum, 0.0f, SumOp(), scratch);

  // dlogits as in row_in_registers_kernel, the exps recomputed (the same exp of the same inputs). The one-hot
  // term is subtracted only in the one vector that holds the target (a test per vector, not per logit).
  const RowGradient r = finish_row(a, row, t, row_max, row_sum, srow);
  bf16* d = a.dlogits + row * a.dlogits_stride;
  for (int q = tid; q < vectors; q += threads) {
    const int j = q * 8;
    float g[8];
    detail::load_bf16<8>(srow + j, g);
SG_UNROLL
    for (int k = 0; k < 8; ++k) g[k] = detail::fast_exp(g[k] - shift) * r.inv_sum;
    if (static_cast<unsigned>(r.onehot_col - j) < 8u) {
SG_UNROLL
      for (int k = 0; k < 8; ++k)
        if (j + k == r.onehot_col) g[k] -= 1.0f;
    }
SG_UNROLL
    for (int k = 0; k < 8; ++k) g[k] *= r.scale;
    if (a.vectorized && j + 7 < V) {
      detail::store_bf16<8>(d + j, g);
    } else {
SG_UNROLL
      for (int k = 0; k < 8; ++k)
        if (j + k < V) d[j + k] = __float2bfloat16_rn(g[k]);
    }
  }
}

// Launches the path for p (V <= kMaxV, shape and pointers checked by the caller) with row strides already
// resolved (0 -> V). fp32: the fewest warps that hold the row in kQuads groups of four per thread;
// `vectorized`: rows aligned for four logits and four dlogits at a time. bf16: bf16_row_threads(V) threads and the
// row in shared memory; its 16-byte accesses check their own alignment.
template <class Launch>
void run(const Launch& launch, const CrossEntropyParams& p, int64_t logits_stride, int64_t dlogits_stride,
         bool vectorized) {
  const dim3 grid(static_cast<unsigned>(p.rows));
  Args args{.logits = p.logits,
            .targets = p.targets,
            .loss_mask = p.loss_mask,
            .dlogits = p.dlogits,
            .row_loss = p.row_loss,
            .V = static_cast<int>(p.V),
            .logits_stride = logits_stride,
            .dlogits_stride = dlogits_stride,
            .token_count = p.token_count,
            .loss_scale = p.loss_scale,
            .vectorized = vectorized};
  if (p.logits_dtype == LogitsDtype::bf16) {
    const auto aligned16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
    args.vectorized = aligned16(p.logits) && aligned16(p.dlogits) && logits_stride % 8 == 0 && dlogits_stride % 8 == 0;
    launch("cross_entropy_row_in_shared_bf16_kernel", row_in_shared_bf16_kernel, grid, bf16_row_threads(p.V),
           bf16_row_smem_bytes(p.V), args);
    return;
  }
  const int threads = static_cast<int>(detail::ceil_div(p.V, 32 * kQuads * 4) * 32);
  launch("cross_entropy_row_in_registers_kernel", row_in_registers_kernel<float>, grid, threads, 32 * sizeof(float),
         args);
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::cross_entropy_registers

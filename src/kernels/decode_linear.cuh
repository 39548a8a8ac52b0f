#pragma once
// Kernel and launch sequence of the decoding step's linear (kernels/decode_linear.h), written over a launch
// policy so the CPU emulator of the tests runs the same code as the launcher (detail::CudaLaunch).
//
// Bound by reading W once. A warp computes two rows of W (kWeightRows) for every row of x: its lanes take the
// 16-byte chunks of K in turn (lane l: chunks l, l + 32, ...), kChunksInFlight of them per pass, and every weight
// load of a pass (2 x kChunksInFlight per lane) is issued before the first multiply, so a lane keeps that many
// 16-byte reads from memory in flight (streaming: read once). The x rows' chunks come from L1 and L2 (every warp
// reads them). Each lane keeps kRows x 2 fp32 sums; the warp then reduces them by halving (each exchange step
// hands half of the values to the partner lane, so 16 values take 16 shuffles, not 80), every value in the same
// tree, so a weight row's outputs depend neither on the warp's other row nor on the number of x rows (the tests
// compare bits across both). No shared memory, no barrier.
// The two rows: W rows 2w and 2w + 1 (outputs 2w, 2w + 1), or with kSwiglu the gate row w and the up row N/2 + w
// (output w): the halving puts the gate's and the up's sums of an x row on lanes 16 apart. kQkv with RoPE gives the
// first warps the rotation's pairs (columns i and i + d/2 of a q or k head), the rest consecutive columns; the
// rotation, its fp64 angle included, is kernels/rope_rotation.cuh's, so the output is bit for bit rope_forward's.
// A bias joins each weight row's fp32 sum once the reduction is done (the tensor-core kernel: once the warps' partial
// sums are added), before anything is rounded.
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/common.cuh"
#include "kernels/decode_linear.h"
#include "kernels/rope_rotation.cuh"
#include "kernels/silu.cuh"
#include "kernels/squared_relu.cuh"
#include "reference/rope.h"
#include "reference/rope_frequencies.h"

namespace sg::kernels::decode_linear {
SG_EMULATED_NAMESPACE_BEGIN

inline constexpr int kThreads = 128;
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kWeightRows = 2;
inline constexpr int kChunksInFlight = 8;  // per lane and weight row

struct Args {
  bf16* y;
  const bf16* x;
  const bf16* w;
  const bf16* bias;  // [N] or null
  int64_t T, K, N;
  int64_t out_width;         // columns of y
  int64_t outputs_per_warp;  // 2, or 1 with kSwiglu
  DecodeQkvEpilogue qkv;     // kQkv only
};

// kQkv's columns: the rotation pairs (i, i + rd/2) of the q and k heads' first rd dimensions (rd: the dimensions
// rotated; none without RoPE), then the columns no pair holds, in order: the rest of each q and k head (partial
// rotary), then the v heads.
SG_HOST_DEVICE int64_t qkv_rotated_dims(const Args& a) {
  return a.qkv.rope ? ref::rope_rotated_dims(a.qkv.shape.head_dim, a.qkv.rotary_dim) : 0;
}
SG_HOST_DEVICE int64_t qkv_rotation_pairs(const Args& a) {
  return (a.qkv.shape.heads + a.qkv.shape.kv_heads) * (qkv_rotated_dims(a) / 2);
}
// Column of pair p's first (second: its partner) element.
SG_HOST_DEVICE int64_t qkv_pair_column(const Args& a, int64_t p, bool second) {
  const int64_t half = qkv_rotated_dims(a) / 2;
  return p / half * a.qkv.shape.head_dim + p % half + (second ? half : 0);
}
// Column of the u-th column no pair holds (u < N - 2 * pairs).
SG_HOST_DEVICE int64_t qkv_unpaired_column(const Args& a, int64_t u) {
  const int64_t d = a.qkv.shape.head_dim, rd = qkv_rotated_dims(a);
  const int64_t rotated_heads = a.qkv.shape.heads + a.qkv.shape.kv_heads, pass = d - rd;  // pass: even
  if (u < rotated_heads * pass) return u / pass * d + rd + u % pass;
  return rotated_heads * d + (u - rotated_heads * pass);
}

// The two columns (W rows) of warp w: consecutive ones, or under kQkv with RoPE a rotation pair first.
struct WarpColumns {
  int64_t first, second;  // second == first: the warp's one column (N odd)
  int64_t pair = -1;      // the rotation pair i of a q or k head, or -1
};
SG_DEVICE WarpColumns qkv_columns(const Args& a, int64_t w) {
  const int64_t pairs = qkv_rotation_pairs(a);
  if (w < pairs) return {qkv_pair_column(a, w, false), qkv_pair_column(a, w, true), w % (qkv_rotated_dims(a) / 2)};
  // Two unpaired columns a warp: consecutive ones (a head's rest and the v heads have even widths).
  const int64_t u = 2 * (w - pairs), unpaired = a.N - 2 * pairs;
  const int64_t first = qkv_unpaired_column(a, u);
  return {first, u + 1 < unpaired ? qkv_unpaired_column(a, u + 1) : first};
}

// kQkv's epilogue of one (x row t, column): the rotation where the column is in a pair, the row's output, and the
// cache for a k or v column.
SG_DEVICE void store_qkv(const Args& a, int64_t t, int64_t column, int64_t pair, bool second, float mine,
                         float partner) {
  const DecodeQkvEpilogue& q = a.qkv;
  const int64_t d = q.shape.head_dim;
  const int32_t pos = q.positions[t];
  float value = mine;
  if (pair >= 0) {
    float c, s, out1, out2;
    rope::cos_sin(pos, ref::rope_inv_freq(pair, qkv_rotated_dims(a), q.base, q.scaling), q.scaling.attention_factor, c,
                  s);
    rope::rotate(second ? partner : mine, second ? mine : partner, c, s, out1, out2);
    value = second ? out2 : out1;
  }
  const bf16 out = __float2bfloat16_rn(value);
  a.y[t * a.N + column] = out;
  const int64_t kv_column = column - q.shape.heads * d;
  if (kv_column < 0 || pos < 0 || pos >= q.shape.capacity) return;
  const int64_t kv_head = kv_column / d, e = kv_column % d;
  const bool is_v = kv_head >= q.shape.kv_heads;
  const int64_t g = is_v ? kv_head - q.shape.kv_heads : kv_head;
  const int64_t slot = q.shape.first_slot + t / q.shape.rows_per_slot;
  (is_v ? q.v_cache : q.k_cache)[((slot * q.shape.kv_heads + g) * q.shape.capacity + pos) * d + e] = out;
}

// 16 bytes of W: read once, so marked evict-first (the x rows, read by every warp, stay in the caches).
SG_DEVICE uint4 load_weight_chunk(const bf16* src) {
#if defined(SG_SIMT_EMULATION)
  return detail::load_16_bytes(src);
#else
  return __ldcs(reinterpret_cast<const uint4*>(src));
#endif
}

SG_DEVICE float bf16_round(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}

// Halving reduction of V values over the warp (V a power of two <= 32): at each shuffle offset (16, 8, ...) a
// lane keeps half of its values and adds the partner's copies of them, until one value remains, which the
// remaining offsets sum by butterfly. Afterwards a lane holds the warp's sum of value `index`; lanes that differ
// only in the butterfly's bits hold the same one. Every value combines the lanes in the same tree (offset 16
// first), whichever lane computes it.
template <int kWidth, int kOffset, int V>
SG_DEVICE void warp_halving_sum(float (&v)[V], int& index, unsigned lane) {
  if constexpr (kOffset > 0) {
    if constexpr (kWidth > 1) {
      constexpr int kHalf = kWidth / 2;
      const bool upper = (lane & static_cast<unsigned>(kOffset)) != 0;
      SG_UNROLL
      for (int j = 0; j < kHalf; ++j) {
        const float give = upper ? v[j] : v[j + kHalf];
        const float keep = upper ? v[j + kHalf] : v[j];
        v[j] = keep + detail::shfl_xor(give, kOffset);
      }
      if (upper) index += kHalf;
      warp_halving_sum<kHalf, kOffset / 2>(v, index, lane);
    } else {
      v[0] += detail::shfl_xor(v[0], kOffset);
      warp_halving_sum<1, kOffset / 2>(v, index, lane);
    }
  }
}

template <int kRows, DecodeLinearEpilogue E>
SG_KERNEL(kThreads)
decode_linear_kernel(Args a) {
  constexpr int V = kRows * kWeightRows;  // value r * kRows + t: weight row r, x row t
  const unsigned lane = detail::lane_id();
  const int64_t warp = static_cast<int64_t>(detail::block_index_x()) * kWarps + detail::warp_id();
  const int64_t j0 = warp * a.outputs_per_warp;  // the warp's first output column
  if (j0 >= a.out_width) return;                 // the whole warp: no collective is left waiting
  // The warp's weight rows; a second row past the last output reads a valid row and is never written.
  WarpColumns columns{j0, j0 + 1 < a.N ? j0 + 1 : j0};
  if constexpr (E == DecodeLinearEpilogue::kSwiglu) columns.second = a.out_width + j0;
  if constexpr (E == DecodeLinearEpilogue::kQkv) columns = qkv_columns(a, warp);
  const bf16* wrow[kWeightRows] = {a.w + columns.first * a.K, a.w + columns.second * a.K};
  // x rows past T read row T - 1 (their sums are never written).
  const bf16* xrow[kRows];
  SG_UNROLL
  for (int t = 0; t < kRows; ++t) xrow[t] = a.x + (t < a.T ? t : a.T - 1) * a.K;

  float acc[kWeightRows][kRows];
  SG_UNROLL
  for (int r = 0; r < kWeightRows; ++r) {
    SG_UNROLL
    for (int t = 0; t < kRows; ++t) acc[r][t] = 0.0f;
  }
  const int64_t chunks = a.K / detail::kBf16PerVec;
  for (int64_t base = lane; base < chunks; base += 32 * kChunksInFlight) {
    uint4 wv[kChunksInFlight][kWeightRows];
    SG_UNROLL
    for (int g = 0; g < kChunksInFlight; ++g) {
      const int64_t i = base + 32 * g;
      if (i < chunks) {
        SG_UNROLL
        for (int r = 0; r < kWeightRows; ++r) wv[g][r] = load_weight_chunk(wrow[r] + i * detail::kBf16PerVec);
      }
    }
    SG_UNROLL
    for (int g = 0; g < kChunksInFlight; ++g) {
      const int64_t i = base + 32 * g;
      if (i < chunks) {
        float wf[kWeightRows][detail::kBf16PerVec];
        SG_UNROLL
        for (int r = 0; r < kWeightRows; ++r)
          detail::load_bf16<detail::kBf16PerVec>(reinterpret_cast<const bf16*>(&wv[g][r]), wf[r]);
        SG_UNROLL
        for (int t = 0; t < kRows; ++t) {
          float xf[detail::kBf16PerVec];
          detail::load_bf16<detail::kBf16PerVec>(xrow[t] + i * detail::kBf16PerVec, xf);
          SG_UNROLL
          for (int r = 0; r < kWeightRows; ++r) {
            SG_UNROLL
            for (int e = 0; e < detail::kBf16PerVec; ++e) acc[r][t] = detail::fma_rn(xf[e], wf[r][e], acc[r][t]);
          }
        }
      }
    }
  }

  float v[V];
  SG_UNROLL
  for (int r = 0; r < kWeightRows; ++r) {
    SG_UNROLL
    for (int t = 0; t < kRows; ++t) v[r * kRows + t] = acc[r][t];
  }
  int index = 0;
  warp_halving_sum<V, 16>(v, index, lane);
  const int r = index / kRows, t = index % kRows;
  // Every lane (r is 0 or 1, both valid W rows) adds its row's bias before the exchange below, so the partner's value
  // arrives biased too. No add without a bias: + 0.0f would turn a -0.0 sum into +0.0.
  if (a.bias) v[0] += __bfloat162float(a.bias[r == 0 ? columns.first : columns.second]);
  // The first halving step splits r: lanes below 16 hold weight row 0's sums, lane + 16 the same x row's of row 1.
  const float other = detail::shfl_xor(v[0], 16);
  if (lane % (32 / V) != 0) return;
  if (t >= a.T) return;
  if constexpr (E == DecodeLinearEpilogue::kSwiglu) {
    if (r == 0) a.y[t * a.out_width + j0] = __float2bfloat16_rn(detail::swiglu(bf16_round(v[0]), bf16_round(other)));
  } else if constexpr (E == DecodeLinearEpilogue::kQkv) {
    if (r == 1 && columns.second == columns.first) return;
    store_qkv(a, t, r == 0 ? columns.first : columns.second, columns.pair, r == 1, bf16_round(v[0]), bf16_round(other));
  } else {
    const int64_t j = j0 + r;
    if (j < a.out_width) {
      const float value = bf16_round(v[0]);
      a.y[t * a.out_width + j] =
          __float2bfloat16_rn(E == DecodeLinearEpilogue::kSquaredRelu ? squared_relu::value(value) : value);
    }
  }
}

// The tensor-core variant (DecodeLinearParams::tensor_cores). A block takes 16 weight rows (the mma's m) and the
// x rows (its n = 8; rows past T are zeros); its 8 warps split K in 32-element steps (warp w: steps w, w + 8, ...).
// In a step, lane (group g, quad c) loads 16 bytes of weight rows g and g + 8 and of x row g at chunk 4 s + c: the
// step's 32 elements of K, which two mma.sync k16 steps take in a fixed order (words 0-1 of each chunk, then words
// 2-3; the A and B fragments pair the same words, so the product is the sum over K). The warps' 16 x 8 partial sums
// are then added in warp order through shared memory, and one thread per (x row, slot) runs the epilogue.
// Slots: kNone / kSquaredRelu rows j0 .. j0 + 15; kSwiglu gate rows j .. j + 7 then their up rows; kQkv the rotation
// pairs (slots i and i + 8: columns i and i + rd/2 of a head) in the first blocks, then 16 of the columns no pair
// holds (qkv_unpaired_column).
inline constexpr int kMmaThreads = 256;
inline constexpr int kMmaWarps = kMmaThreads / 32;
inline constexpr int kMmaRows = 16;          // weight rows a block takes
inline constexpr int kMmaStepsInFlight = 4;  // 32-element steps of K a warp loads before its first mma

// One slot of a block: its W row (valid even where the slot is not written), its output column (-1: none) and,
// under kQkv, the rotation pair i (-1: none).
struct MmaSlot {
  int64_t row, column, pair;
};

SG_HOST_DEVICE int64_t mma_pair_blocks(const Args& a) {
  return detail::ceil_div(qkv_rotation_pairs(a), kMmaRows / 2);
}

template <DecodeLinearEpilogue E>
SG_DEVICE MmaSlot mma_slot(const Args& a, int64_t block, int i) {
  constexpr int kHalf = kMmaRows / 2;
  if constexpr (E == DecodeLinearEpilogue::kSwiglu) {
    const int64_t j = block * kHalf + i % kHalf;
    const int64_t jj = j < a.out_width ? j : a.out_width - 1;
    return {i < kHalf ? jj : a.out_width + jj, i < kHalf && j < a.out_width ? j : -1, -1};
  } else if constexpr (E == DecodeLinearEpilogue::kQkv) {
    const int64_t pairs = qkv_rotation_pairs(a);
    if (block < mma_pair_blocks(a)) {
      const int64_t p = block * kHalf + i % kHalf, pc = p < pairs ? p : pairs - 1;
      const int64_t row = qkv_pair_column(a, pc, i >= kHalf);
      return {row, p < pairs ? row : -1, pc % (qkv_rotated_dims(a) / 2)};
    }
    const int64_t u = (block - mma_pair_blocks(a)) * kMmaRows + i, unpaired = a.N - 2 * pairs;
    const int64_t col = qkv_unpaired_column(a, u < unpaired ? u : unpaired - 1);
    return {col, u < unpaired ? col : -1, -1};
  } else {
    const int64_t j = block * kMmaRows + i;
    return {j < a.N ? j : a.N - 1, j < a.N ? j : -1, -1};
  }
}

// 16 bytes of x row t at chunk q, or zeros past T or K.
SG_DEVICE uint4 load_x_chunk(const Args& a, int64_t t, int64_t q, int64_t chunks) {
  if (t < a.T && q < chunks) return detail::load_16_bytes(a.x + t * a.K + q * detail::kBf16PerVec);
  return uint4{0u, 0u, 0u, 0u};
}

template <DecodeLinearEpilogue E>
SG_KERNEL(kMmaThreads)
decode_linear_mma_kernel(Args a) {
  const int64_t block = detail::block_index_x();
  const int lane = static_cast<int>(detail::lane_id()), warp = static_cast<int>(detail::warp_id());
  const int g = lane / 4, c = lane % 4;
  const bf16* w_lo = a.w + mma_slot<E>(a, block, g).row * a.K;
  const bf16* w_hi = a.w + mma_slot<E>(a, block, g + 8).row * a.K;
  const int64_t chunks = a.K / detail::kBf16PerVec;
  const int64_t steps = detail::ceil_div(chunks, 4);
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t s0 = warp; s0 < steps; s0 += static_cast<int64_t>(kMmaWarps) * kMmaStepsInFlight) {
    uint4 lo[kMmaStepsInFlight], hi[kMmaStepsInFlight], xv[kMmaStepsInFlight];
    SG_UNROLL
    for (int u = 0; u < kMmaStepsInFlight; ++u) {
      const int64_t q = (s0 + static_cast<int64_t>(u) * kMmaWarps) * 4 + c;
      const bool in = q < chunks;
      lo[u] = in ? load_weight_chunk(w_lo + q * detail::kBf16PerVec) : uint4{0u, 0u, 0u, 0u};
      hi[u] = in ? load_weight_chunk(w_hi + q * detail::kBf16PerVec) : uint4{0u, 0u, 0u, 0u};
      xv[u] = load_x_chunk(a, g, q, chunks);
    }
    SG_UNROLL
    for (int u = 0; u < kMmaStepsInFlight; ++u) {
      if ((s0 + static_cast<int64_t>(u) * kMmaWarps) >= steps) break;  // the warp's steps: uniform
      const uint32_t first[4] = {lo[u].x, hi[u].x, lo[u].y, hi[u].y};
      const uint32_t second[4] = {lo[u].z, hi[u].z, lo[u].w, hi[u].w};
      detail::mma_bf16(d, first, xv[u].x, xv[u].y);
      detail::mma_bf16(d, second, xv[u].z, xv[u].w);
    }
  }
  // d: (slot g, x rows 2c, 2c + 1) and (slot g + 8, the same rows).
  auto* partial = reinterpret_cast<float*>(detail::dynamic_smem());  // [kMmaWarps][kMmaRows][8]
  float* sums = partial + kMmaWarps * kMmaRows * 8;                  // [kMmaRows][8]
  float* mine = partial + warp * kMmaRows * 8;
  mine[g * 8 + 2 * c] = d[0];
  mine[g * 8 + 2 * c + 1] = d[1];
  mine[(g + 8) * 8 + 2 * c] = d[2];
  mine[(g + 8) * 8 + 2 * c + 1] = d[3];
  detail::block_sync();
  const int tid = detail::thread_index();
  if (tid < kMmaRows * 8) {
    float total = partial[tid];
    for (int w = 1; w < kMmaWarps; ++w) total += partial[w * kMmaRows * 8 + tid];
    // The bias of the slot's W row, here so that every slot's sum the epilogue reads (a partner's too) has it; none
    // added without one (+ 0.0f would turn a -0.0 sum into +0.0).
    if (a.bias) total += __bfloat162float(a.bias[mma_slot<E>(a, block, tid / 8).row]);
    sums[tid] = total;
  }
  detail::block_sync();
  if (tid >= kMmaRows * 8) return;
  const int slot = tid / 8, t = tid % 8;
  const MmaSlot m = mma_slot<E>(a, block, slot);
  if (t >= a.T || m.column < 0) return;
  const float value = bf16_round(sums[slot * 8 + t]);
  const int64_t j = m.column;
  if constexpr (E == DecodeLinearEpilogue::kSwiglu) {
    a.y[t * a.out_width + j] = __float2bfloat16_rn(detail::swiglu(value, bf16_round(sums[(slot + 8) * 8 + t])));
  } else if constexpr (E == DecodeLinearEpilogue::kQkv) {
    const int partner = slot < kMmaRows / 2 ? slot + kMmaRows / 2 : slot - kMmaRows / 2;
    store_qkv(a, t, j, m.pair, slot >= kMmaRows / 2, value, bf16_round(sums[partner * 8 + t]));
  } else {
    a.y[t * a.out_width + j] =
        __float2bfloat16_rn(E == DecodeLinearEpilogue::kSquaredRelu ? squared_relu::value(value) : value);
  }
}

template <class Launch>
void launch_mma(const Launch& launch, const Args& args, DecodeLinearEpilogue epilogue) {
  int64_t blocks = detail::ceil_div(args.N, kMmaRows);
  if (epilogue == DecodeLinearEpilogue::kSwiglu) blocks = detail::ceil_div(args.out_width, kMmaRows / 2);
  if (epilogue == DecodeLinearEpilogue::kQkv) {
    blocks = mma_pair_blocks(args) + detail::ceil_div(args.N - 2 * qkv_rotation_pairs(args), kMmaRows);
  }
  const dim3 grid(static_cast<unsigned>(blocks));
  constexpr size_t smem = (kMmaWarps + 1) * kMmaRows * 8 * sizeof(float);
  switch (epilogue) {
    case DecodeLinearEpilogue::kNone:
      launch("decode_linear_mma_kernel", decode_linear_mma_kernel<DecodeLinearEpilogue::kNone>, grid, kMmaThreads, smem,
             args);
      break;
    case DecodeLinearEpilogue::kSwiglu:
      launch("decode_linear_mma_kernel", decode_linear_mma_kernel<DecodeLinearEpilogue::kSwiglu>, grid, kMmaThreads,
             smem, args);
      break;
    case DecodeLinearEpilogue::kSquaredRelu:
      launch("decode_linear_mma_kernel", decode_linear_mma_kernel<DecodeLinearEpilogue::kSquaredRelu>, grid,
             kMmaThreads, smem, args);
      break;
    case DecodeLinearEpilogue::kQkv:
      launch("decode_linear_mma_kernel", decode_linear_mma_kernel<DecodeLinearEpilogue::kQkv>, grid, kMmaThreads, smem,
             args);
      break;
  }
}

template <int kRows, class Launch>
void launch_rows(const Launch& launch, const Args& args, DecodeLinearEpilogue epilogue) {
  const int64_t warps = detail::ceil_div(args.out_width, args.outputs_per_warp);
  const dim3 grid(static_cast<unsigned>(detail::ceil_div(warps, kWarps)));
  constexpr size_t smem = 0;
  switch (epilogue) {
    case DecodeLinearEpilogue::kNone:
      launch("decode_linear_kernel", decode_linear_kernel<kRows, DecodeLinearEpilogue::kNone>, grid, kThreads, smem,
             args);
      break;
    case DecodeLinearEpilogue::kSwiglu:
      launch("decode_linear_kernel", decode_linear_kernel<kRows, DecodeLinearEpilogue::kSwiglu>, grid, kThreads, smem,
             args);
      break;
    case DecodeLinearEpilogue::kSquaredRelu:
      launch("decode_linear_kernel", decode_linear_kernel<kRows, DecodeLinearEpilogue::kSquaredRelu>, grid, kThreads,
             smem, args);
      break;
    case DecodeLinearEpilogue::kQkv:
      launch("decode_linear_kernel", decode_linear_kernel<kRows, DecodeLinearEpilogue::kQkv>, grid, kThreads, smem,
             args);
      break;
  }
}

inline int64_t out_width(DecodeLinearEpilogue epilogue, int64_t N) {
  return epilogue == DecodeLinearEpilogue::kSwiglu ? N / 2 : N;
}

// The launcher's checks, each naming what it found and what the kernel takes.
inline void check_params(const DecodeLinearParams& p) {
  const char* op = "decode_linear_forward";
  SG_CHECK(p.T >= 0 && p.T <= kDecodeLinearMaxRows,
           strprintf("%s: %lld rows; the kernel takes 0 to %lld (more rows run cuBLASLt: model/decode_linear.h)", op,
                     static_cast<long long>(p.T), static_cast<long long>(kDecodeLinearMaxRows)));
  SG_CHECK(p.K > 0 && p.K % detail::kBf16PerVec == 0 && p.N > 0,
           strprintf("%s: K = %lld, N = %lld; the kernel takes K a positive multiple of 8 and N > 0", op,
                     static_cast<long long>(p.K), static_cast<long long>(p.N)));
  SG_CHECK(p.epilogue != DecodeLinearEpilogue::kSwiglu || p.N % 2 == 0,
           strprintf("%s: SwiGLU needs an even N ([gate | up] rows); got %lld", op, static_cast<long long>(p.N)));
  SG_CHECK(p.y && p.x && p.w, strprintf("%s: null pointer in params", op));
  if (p.epilogue == DecodeLinearEpilogue::kQkv) {
    const ref::DecodeAttentionShape& s = p.qkv.shape;
    SG_CHECK(p.qkv.k_cache && p.qkv.v_cache && p.qkv.positions,
             strprintf("%s: the QKV epilogue needs both caches and the positions", op));
    ref::check_decode_attention_shape(s);
    SG_CHECK(s.T == p.T && s.qkv_width() == p.N,
             strprintf("%s: the QKV epilogue's shape has T = %lld and a row of %lld; the call %lld rows of N = %lld",
                       op, static_cast<long long>(s.T), static_cast<long long>(s.qkv_width()),
                       static_cast<long long>(p.T), static_cast<long long>(p.N)));
    SG_CHECK(!p.qkv.rope || (s.head_dim % 2 == 0 && ref::rope_rotary_dim_valid(s.head_dim, p.qkv.rotary_dim)),
             strprintf("%s: RoPE needs an even head_dim (got %lld) and a rotary_dim of 0 (the whole head) or even and "
                       "at most head_dim (got %lld)",
                       op, static_cast<long long>(s.head_dim), static_cast<long long>(p.qkv.rotary_dim)));
    if (p.qkv.rope) ref::check_rope_scaling(op, p.qkv.scaling, ref::rope_rotated_dims(s.head_dim, p.qkv.rotary_dim));
  }
  SG_CHECK(detail::is_aligned(p.x, 16) && detail::is_aligned(p.w, 16),
           strprintf("%s: x (%p) and w (%p) must be 16-byte aligned", op, static_cast<const void*>(p.x),
                     static_cast<const void*>(p.w)));
}

template <class Launch>
void run(const Launch& launch, const DecodeLinearParams& p) {
  check_params(p);
  if (p.T == 0) return;
  const Args args{.y = p.y,
                  .x = p.x,
                  .w = p.w,
                  .bias = p.bias,
                  .T = p.T,
                  .K = p.K,
                  .N = p.N,
                  .out_width = out_width(p.epilogue, p.N),
                  .outputs_per_warp = p.epilogue == DecodeLinearEpilogue::kSwiglu ? 1 : kWeightRows,
                  .qkv = p.qkv};
  if (p.tensor_cores) {
    launch_mma(launch, args, p.epilogue);
  } else if (p.T == 1) {
    launch_rows<1>(launch, args, p.epilogue);
  } else if (p.T == 2) {
    launch_rows<2>(launch, args, p.epilogue);
  } else if (p.T <= 4) {
    launch_rows<4>(launch, args, p.epilogue);
  } else {
    launch_rows<8>(launch, args, p.epilogue);
  }
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::decode_linear

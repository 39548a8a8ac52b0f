#pragma once
// Kernel and launch sequence of rmsnorm_backward (kernels/rmsnorm.h), written over a launch policy so the
// CPU emulator of the tests runs the same code as the launcher (detail::CudaLaunch).
//
// Layout (memory-bound: read x, dout, [dresidual], write din, once each):
// - A row belongs to a group of W warps; thread j of the group owns the vectors j, j + 32W, ... (up to
//   CHUNKS of VEC columns). It loads its x, dout and dresidual of the row once into registers (raw bf16),
//   reduces dot = sum dout w x over the group (warp butterfly, then, for W > 1, the W warp sums in warp
//   order through shared memory), and writes din from the registers. Its weights stay in registers for
//   the whole kernel. No block-wide barrier per row when W == 1. With up to 3 vectors per thread the next
//   row's loads are issued before this row's reduction: two rows in flight per group.
// - A block holds R = 8 / W groups (256 threads) and the grid P = num_partials(T) blocks: group g of block
//   b handles rows b R + g + i P R (i = 0, 1, ...), accumulating dout x rstd for its columns in fp32:
//   in registers with 1 or 2 vectors per thread, in the group's own [H] slice of shared memory with 3
//   (only the owning thread touches a column until the end, so no barrier): the registers that frees make
//   room for the prefetched row. At the end the block adds its R groups' sums column by column in group
//   order and writes its fp32 partial row; partial_sums then adds the P rows per column in a fixed order
//   into dweight. The same additions in the same order either way, and everything is a function of
//   (T, H, vector path), so the bits are the same in every run, eager or graph replay.
// Why both (H200): at 768 columns (1 warp x 3 vectors) the register sums took 128 registers and left no
// room for a second row (16.5 us a call at 8192 rows with dresidual); the shared sums with a prefetched
// row take 15.2 us. At 2048 (4 warps x 2) the registers prefetch anyway and the shared sums were slower
// (37.1 -> 42.9 us).
#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/common.cuh"
#include "kernels/launch_checks.h"
#include "kernels/partial_sums.cuh"
#include "kernels/rmsnorm.h"
#include "kernels/rmsnorm_rows.cuh"
#include "kernels/shape_limits.h"

namespace sg::kernels::rmsnorm_bwd {
SG_EMULATED_NAMESPACE_BEGIN

// 2 blocks of 256 threads per SM on a 132-SM H100/H200: one wave, every block resident, enough rows in
// flight to saturate HBM. A plan-time constant (not the device's SM count): the partial rows, hence the
// dweight bits, depend on the shape only.
inline constexpr int64_t kMaxPartials = 264;
inline constexpr int kBlockThreads = 256;
// The widest row group, hence the widest H, is kernels/shape_limits.h's (validation checks it too).
inline constexpr int kMaxBlockThreads = kRmsNormBackwardMaxThreads;  // one group of up to 16 warps
inline constexpr int kDotFloats = 2 * (kMaxBlockThreads / 32);  // per-warp dot sums, double-buffered
inline constexpr int kMaxVecChunks = kRmsNormBackwardMaxVecChunks;  // 16-byte vectors per thread and row
inline constexpr int kMaxScalarChunks = kRmsNormBackwardMaxScalarChunks;  // single bf16 per chunk, scalar path
static_assert(kRmsNormVectorWidth == detail::kBf16PerVec, "shape_limits.h's vector width is the kernels' vector");

SG_HOST_DEVICE int64_t num_partials(int64_t T) { return T < kMaxPartials ? T : kMaxPartials; }

struct BackwardArgs {
  RmsNormBackwardParams p;
  rmsnorm_rows::Rows rows;  // of din, dout, in, dresidual
  int warps_per_row = 1;   // W
  int groups = 1;          // R: rows in flight per block
  int64_t partials = 0;    // P: blocks
};

// VEC bf16 as loaded (bits), two per 32-bit word, the lower column in the low half.
template <int VEC>
struct PackedBf16 {
  uint32_t w[(VEC + 1) / 2];
};

template <int VEC>
SG_DEVICE void load_packed(const bf16* src, PackedBf16<VEC>& dst) {
  if constexpr (VEC == 8) {
    const uint4 raw = detail::load_16_bytes(src);
    dst.w[0] = raw.x;
    dst.w[1] = raw.y;
    dst.w[2] = raw.z;
    dst.w[3] = raw.w;
  } else {
    static_assert(VEC == 1, "VEC must be 8 or 1");
    uint16_t bits;
    __builtin_memcpy(&bits, src, 2);
    dst.w[0] = bits;
  }
}

// Element e as fp32 (exact: bf16 is the top half of an fp32).
template <int VEC>
SG_DEVICE float unpacked(const PackedBf16<VEC>& v, int e) {
  const uint32_t bits = (e & 1) != 0 ? (v.w[e >> 1] & 0xffff0000u) : (v.w[e >> 1] << 16);
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// One row's inputs for this thread: rstd and its x, dout, dresidual vectors (bits).
template <int VEC, int CHUNKS>
struct RowInputs {
  float r = 0.0f;
  PackedBf16<VEC> x[CHUNKS] = {}, dy[CHUNKS] = {}, dres[CHUNKS] = {};
};

// Loads them for `row` (nothing when row >= T). Vector v = j + k * group_threads of chunk k.
template <int VEC, int CHUNKS>
SG_DEVICE void load_row(const RmsNormBackwardParams& p, const rmsnorm_rows::Rows& rows, int64_t row, int j,
                        int group_threads, RowInputs<VEC, CHUNKS>& in) {
  if (row >= p.T) return;
  const int64_t n_vec = p.H / VEC, base = rmsnorm_rows::row_start(rows, row, p.H);
  in.r = p.rstd[row];
SG_UNROLL
  for (int k = 0; k < CHUNKS; ++k) {
    const int64_t v = j + static_cast<int64_t>(k) * group_threads;
    if (v >= n_vec) continue;
    const int64_t at = base + v * VEC;
    load_packed<VEC>(p.in + at, in.x[k]);
    load_packed<VEC>(p.dout + at, in.dy[k]);
    // Read before this thread's din store of the row: din may alias dresidual.
    if (p.dresidual != nullptr) load_packed<VEC>(p.dresidual + at, in.dres[k]);
  }
}

// The dweight sums live in shared memory when a thread has 3 vectors (see the top of the file).
template <int VEC, int CHUNKS>
inline constexpr bool kSharedSums = VEC == 8 && CHUNKS == 3;

// Shared memory of the kernel: the dot double buffer, then the groups' sums ([groups][H] with shared sums,
// else one [H] row through which the groups add theirs when there are several).
inline size_t backward_shared_bytes(int64_t H, int groups, bool shared_sums) {
  const size_t rows = shared_sums ? static_cast<size_t>(groups) : (groups > 1 ? 1 : 0);
  return sizeof(float) * (kDotFloats + rows * static_cast<size_t>(H));
}

// PREFETCH (up to 3 vectors per thread): the next row's loads are issued before this row's reduction,
// two rows in flight per group. The arithmetic, hence the bits, is the same either way.
template <int VEC, int CHUNKS>
SG_KERNEL(kMaxBlockThreads) rmsnorm_backward_kernel(BackwardArgs a) {
  constexpr bool kShared = kSharedSums<VEC, CHUNKS>;
  constexpr bool kPrefetch = VEC == 8 && CHUNKS <= 3;
  const RmsNormBackwardParams& p = a.p;
  float* warp_dots = reinterpret_cast<float*>(detail::dynamic_smem());  // [2][warps]
  float* group_sums = warp_dots + kDotFloats;                            // 16-byte aligned
  const int group_threads = 32 * a.warps_per_row;
  const int t = detail::thread_index();
  const int group = t / group_threads;
  const int j = t - group * group_threads;
  const int warp = static_cast<int>(detail::warp_id()), lane = static_cast<int>(detail::lane_id());
  const int64_t H = p.H, n_vec = H / VEC;
  const float inv_h = 1.0f / static_cast<float>(H);

  PackedBf16<VEC> w[CHUNKS] = {};
  float acc[kShared ? 1 : CHUNKS][VEC];  // register sums (unused with shared sums)
  float* shared_acc = group_sums + static_cast<int64_t>(group) * H;  // this group's slice (shared sums)
SG_UNROLL
  for (int k = 0; k < CHUNKS; ++k) {
    const int64_t v = j + static_cast<int64_t>(k) * group_threads;
    if (v < n_vec) load_packed<VEC>(p.weight + v * VEC, w[k]);
    float zero[VEC];
SG_UNROLL
    for (int e = 0; e < VEC; ++e) zero[e] = 0.0f;
    if constexpr (kShared) {
      if (v < n_vec) detail::store_f32<VEC>(shared_acc + v * VEC, zero);
    } else {
SG_UNROLL
      for (int e = 0; e < VEC; ++e) acc[k][e] = zero[e];
    }
  }

  const int64_t rows_per_iter = a.partials * a.groups;
  const int64_t iters = detail::ceil_div(p.T, rows_per_iter);  // the same for every thread of the block
  const int64_t first_row = static_cast<int64_t>(detail::block_index_x()) * a.groups + group;
  RowInputs<VEC, CHUNKS> cur;
  load_row(p, a.rows, first_row, j, group_threads, cur);
  for (int64_t i = 0; i < iters; ++i) {
    const int64_t row = first_row + i * rows_per_iter;
    const bool live = row < p.T;  // uniform over the group (whole warps)
    RowInputs<VEC, CHUNKS> next;
    if constexpr (kPrefetch) load_row(p, a.rows, row + rows_per_iter, j, group_threads, next);
    float dot = 0.0f;
    if (live) {
SG_UNROLL
      for (int k = 0; k < CHUNKS; ++k) {
        if (j + static_cast<int64_t>(k) * group_threads >= n_vec) continue;
SG_UNROLL
        for (int e = 0; e < VEC; ++e) dot += unpacked(cur.dy[k], e) * unpacked(w[k], e) * unpacked(cur.x[k], e);
      }
    }
    dot = detail::warp_reduce_sum(dot);
    if (a.warps_per_row > 1) {  // uniform over the block: every thread reaches the barrier
      float* dots = warp_dots + (i & 1) * (kDotFloats / 2);  // double buffer: one barrier per iteration
      if (lane == 0) dots[warp] = dot;
      detail::block_sync();
      dot = 0.0f;
      for (int k = 0; k < a.warps_per_row; ++k) dot += dots[group * a.warps_per_row + k];
    }
    if (live) {
      const float r = cur.r;
      bf16* din = p.din + rmsnorm_rows::row_start(a.rows, row, H);
      const float coef = r * r * r * dot * inv_h;
SG_UNROLL
      for (int k = 0; k < CHUNKS; ++k) {
        const int64_t v = j + static_cast<int64_t>(k) * group_threads;
        if (v >= n_vec) continue;
        float out[VEC], sums[VEC];
        if constexpr (kShared) {
          detail::load_f32<VEC>(shared_acc + v * VEC, sums);
        } else {
SG_UNROLL
          for (int e = 0; e < VEC; ++e) sums[e] = acc[k][e];
        }
SG_UNROLL
        for (int e = 0; e < VEC; ++e) {
          const float xv = unpacked(cur.x[k], e), gv = unpacked(cur.dy[k], e);
          out[e] = r * unpacked(w[k], e) * gv - coef * xv;
          if (p.dresidual != nullptr) out[e] += unpacked(cur.dres[k], e);
          sums[e] += gv * xv * r;
        }
        detail::store_bf16<VEC>(din + v * VEC, out);
        if constexpr (kShared) {
          detail::store_f32<VEC>(shared_acc + v * VEC, sums);
        } else {
SG_UNROLL
          for (int e = 0; e < VEC; ++e) acc[k][e] = sums[e];
        }
      }
    }
    if constexpr (kPrefetch) {
      cur = next;
    } else {
      load_row(p, a.rows, row + rows_per_iter, j, group_threads, cur);
    }
  }

  float* partial = p.scratch + static_cast<int64_t>(detail::block_index_x()) * H;
  if constexpr (kShared) {
    // The block's partial row: the groups' slices added in group order, column by column.
    detail::block_sync();
    const int64_t stride = static_cast<int64_t>(detail::block_threads()) * VEC;
    for (int64_t c = static_cast<int64_t>(t) * VEC; c < H; c += stride) {
      float total[VEC];
      detail::load_f32<VEC>(group_sums + c, total);
      for (int g = 1; g < a.groups; ++g) {
        float more[VEC];
        detail::load_f32<VEC>(group_sums + static_cast<int64_t>(g) * H + c, more);
SG_UNROLL
        for (int e = 0; e < VEC; ++e) total[e] += more[e];
      }
      detail::store_f32<VEC>(partial + c, total);
    }
    return;
  }
  // The block's partial row: groups add theirs in group order; the last one writes the row.
  for (int g = 0; g < a.groups; ++g) {
    if (group == g) {
SG_UNROLL
      for (int k = 0; k < CHUNKS; ++k) {
        const int64_t c = (j + static_cast<int64_t>(k) * group_threads) * VEC;
        if (c >= H) continue;
        if (g > 0) {
          float prev[VEC];
          detail::load_f32<VEC>(group_sums + c, prev);
SG_UNROLL
          for (int e = 0; e < VEC; ++e) acc[k][e] = prev[e] + acc[k][e];
        }
        detail::store_f32<VEC>((g + 1 == a.groups ? partial : group_sums) + c, acc[k]);
      }
    }
    if (g + 1 < a.groups) detail::block_sync();
  }
}

// Row groups and the per-thread chunk count for width H on the vector (VEC 8) or scalar path.
struct BackwardShape {
  int warps_per_row = 1, chunks = 1, groups = 1;
};

// Vector path: the chunk count (3, 2 or 1 vectors per thread; 4 only for rows that need it, where the
// kernel spills a little) that leaves the fewest idle lanes in the last chunk, the larger on a tie (more
// bytes in flight per thread): 768 -> 1 warp x 3, 2048 -> 4 warps x 2, 4096 -> 8 x 2. Scalar path: up to
// kMaxScalarChunks bf16 per thread.
inline BackwardShape backward_shape(int64_t H, bool vec) {
  const std::string width_problem = rmsnorm_backward_width_problem(H, vec);
  SG_CHECK(width_problem.empty(), "rmsnorm_backward: " + width_problem +
                                      "; raise kRmsNormBackwardMaxVecChunks / kRmsNormBackwardMaxScalarChunks in "
                                      "kernels/shape_limits.h");
  const int64_t n = vec ? H / detail::kBf16PerVec : H;
  const int64_t max_warps = kMaxBlockThreads / 32;
  int64_t best_warps = 0, best_chunks = 0, best_idle = 0;
  for (const int64_t chunks : {int64_t{3}, int64_t{2}, int64_t{1}, int64_t{kMaxVecChunks}}) {
    const int64_t c = vec ? chunks : kMaxScalarChunks;
    const int64_t warps = detail::ceil_div(n, 32 * c);
    if (warps > max_warps) continue;
    const int64_t used = detail::ceil_div(n, 32 * warps);
    const int64_t idle = 32 * warps * used - n;
    if (best_warps == 0 || idle < best_idle) {
      best_warps = warps;
      best_chunks = used;
      best_idle = idle;
    }
    if (!vec) break;
  }
  // Within rmsnorm_backward_max_width every H has a row group; a mismatch is a bug here.
  SG_CHECK(best_warps > 0, strprintf("rmsnorm_backward: no row group for H = %lld although rmsnorm_backward_max_width "
                                     "allows it",
                                     static_cast<long long>(H)));
  BackwardShape s;
  s.warps_per_row = static_cast<int>(best_warps);
  s.chunks = static_cast<int>(best_chunks);
  s.groups = std::max(1, kBlockThreads / 32 / s.warps_per_row);
  return s;
}

template <class Launch, int VEC, int CHUNKS>
void launch_backward(const Launch& launch, const BackwardArgs& a) {
  const size_t smem = backward_shared_bytes(a.p.H, a.groups, kSharedSums<VEC, CHUNKS>);
  launch("rmsnorm_backward_kernel", rmsnorm_backward_kernel<VEC, CHUNKS>, dim3(static_cast<unsigned>(a.partials)),
         32 * a.warps_per_row * a.groups, smem, a);
}

template <class Launch>
void run_backward(const Launch& launch, const RmsNormBackwardParams& p) {
  const char* op = "rmsnorm_backward";
  SG_CHECK(p.T >= 0 && p.T <= INT32_MAX && p.H > 0,
           strprintf("%s: bad shape T=%lld H=%lld (0 <= T < 2^31, H > 0)", op, static_cast<long long>(p.T),
                     static_cast<long long>(p.H)));
  SG_CHECK(p.din && p.dout && p.in && p.weight && p.rstd, strprintf("%s: null pointer in params", op));
  if (p.T == 0) return;
  BackwardArgs a;
  a.p = p;
  a.rows = rmsnorm_rows::resolve(op, p.rows_per_group, p.group_stride, p.T, p.H);
  a.partials = num_partials(p.T);
  detail::check_scratch(op, p.scratch, p.scratch_bytes, static_cast<size_t>(a.partials * p.H) * sizeof(float),
                        strprintf("T=%lld H=%lld", static_cast<long long>(p.T), static_cast<long long>(p.H)),
                        "rmsnorm_backward_scratch_bytes(T, H)");
  const bool vec =
      detail::bf16_vector_path_ok(p.H, {a.rows.group_stride}, {p.din, p.dout, p.in, p.weight, p.dresidual, p.scratch});
  const BackwardShape s = backward_shape(p.H, vec);
  a.warps_per_row = s.warps_per_row;
  a.groups = s.groups;
  if (vec) {
    switch (s.chunks) {
      case 1: launch_backward<Launch, 8, 1>(launch, a); break;
      case 2: launch_backward<Launch, 8, 2>(launch, a); break;
      case 3: launch_backward<Launch, 8, 3>(launch, a); break;
      default: launch_backward<Launch, 8, kMaxVecChunks>(launch, a); break;
    }
  } else if (s.chunks <= 4) {
    launch_backward<Launch, 1, 4>(launch, a);
  } else {
    launch_backward<Launch, 1, kMaxScalarChunks>(launch, a);
  }
  // dweight == nullptr: the caller sums the partial rows itself (add_partial_column_sums_batched).
  if (p.dweight != nullptr) partial_sums::run_column_sums(launch, p.scratch, a.partials, {{p.dweight, p.H}});
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::rmsnorm_bwd

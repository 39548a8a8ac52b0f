#pragma once
// Host side of the SSD scan launchers: shape and pointer checks, the argument block over the caller's
// workspace, and the dispatch on dstate. Shared by ssd_scan_forward.cu, ssd_scan_backward.cu and the CPU
// emulation test (which passes its own launch policy).
#include <string>

#include "core/error.h"
#include "core/strings.h"
#if !defined(SG_SIMT_EMULATION)
#include "cuda/check.h"
#endif
#include "kernels/ssd_scan_backward.cuh"

namespace sg::kernels::ssd {

inline bool detail_is_aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

inline void check_shape(const char* op, const SsdShape& s) {
  SG_CHECK(s.batch >= 0 && s.seqlen >= 0 && s.nheads > 0 && s.ngroups > 0 && s.nheads % s.ngroups == 0,
           strprintf("%s: bad shape batch=%lld seqlen=%lld nheads=%lld ngroups=%lld; nheads must be a positive "
                     "multiple of ngroups",
                     op, static_cast<long long>(s.batch), static_cast<long long>(s.seqlen),
                     static_cast<long long>(s.nheads), static_cast<long long>(s.ngroups)));
  // The instantiated headdim and dstate values and the index bounds: kernels/shape_limits.h (validated too).
  const std::string head_dim_problem = ssd_head_dim_problem(s.headdim);
  SG_CHECK(head_dim_problem.empty(), std::string(op) + ": " + head_dim_problem);
  const std::string state_dim_problem = ssd_state_dim_problem(s.dstate);
  SG_CHECK(state_dim_problem.empty(), std::string(op) + ": " + state_dim_problem);
  const std::string size_problem =
      ssd_size_problem({.batch = s.batch, .seqlen = s.seqlen, .nheads = s.nheads, .headdim = s.headdim});
  SG_CHECK(size_problem.empty(), std::string(op) + ": " + size_problem);
}

// A bf16 tensor of `width` columns per token: 16-byte aligned, row stride (0 = width) a multiple of 8 and
// at least width. Returns the stride to use.
inline int64_t checked_row_stride(const char* op, const char* name, const void* ptr, int64_t stride, int64_t width) {
  SG_CHECK(ptr != nullptr, strprintf("%s: %s is null", op, name));
  SG_CHECK(detail_is_aligned16(ptr), strprintf("%s: %s at %p is not 16-byte aligned", op, name, ptr));
  const int64_t s = stride == 0 ? width : stride;
  SG_CHECK(s >= width && s % 8 == 0,
           strprintf("%s: %s_row_stride %lld must be 0 (packed) or a multiple of 8 that is >= %lld", op, name,
                     static_cast<long long>(stride), static_cast<long long>(width)));
  return s;
}

inline SsdArgs make_args(const char* op, const SsdShape& s, void* workspace, size_t workspace_bytes) {
  const SsdWorkspaceLayout w = ssd_workspace_layout(s);
  SG_CHECK(workspace != nullptr && workspace_bytes >= w.total && detail_is_aligned16(workspace),
           strprintf("%s: workspace of %zu bytes at %p is too small or misaligned for batch=%lld seqlen=%lld "
                     "nheads=%lld dstate=%lld; plan ssd_workspace_bytes(shape) = %zu bytes (16-byte aligned)",
                     op, workspace_bytes, workspace, static_cast<long long>(s.batch),
                     static_cast<long long>(s.seqlen), static_cast<long long>(s.nheads),
                     static_cast<long long>(s.dstate), w.total));
  auto* base = static_cast<unsigned char*>(workspace);
  SsdArgs a;
  a.batch = static_cast<int>(s.batch);
  a.seqlen = static_cast<int>(s.seqlen);
  a.nheads = static_cast<int>(s.nheads);
  a.ngroups = static_cast<int>(s.ngroups);
  a.nchunks = static_cast<int>((s.seqlen + kQ - 1) / kQ);
  a.heads_per_group = static_cast<int>(s.nheads / s.ngroups);
  a.hsplit = w.hsplit;
  a.cum = reinterpret_cast<float*>(base + w.cum);
  a.states32 = reinterpret_cast<float*>(base + w.states32);
  a.states16 = reinterpret_cast<bf16*>(base + w.states16);
  a.grads16 = reinterpret_cast<bf16*>(base + w.grads16);
  a.chunk_dot = reinterpret_cast<float*>(base + w.chunk_dot);
  a.dA_part = reinterpret_cast<float*>(base + w.dA_part);
  a.dD_part = reinterpret_cast<float*>(base + w.dD_part);
  a.dbc_part = reinterpret_cast<float*>(base + w.dbc_part);
  return a;
}

// The argument blocks of the two launchers (shape, pointers, strides and workspace checked).
inline SsdArgs forward_args(const SsdScanForwardParams& p) {
  const char* op = "ssd_scan_forward";
  check_shape(op, p.shape);
  const SsdShape& s = p.shape;
  SsdArgs a = make_args(op, s, p.workspace, p.workspace_bytes);
  SG_CHECK(p.dt != nullptr && p.A != nullptr, strprintf("%s: dt or A is null", op));
  a.x = p.x, a.dt = p.dt, a.A = p.A, a.Bm = p.Bm, a.Cm = p.Cm, a.D = p.D, a.y = p.y;
  a.x_stride = checked_row_stride(op, "x", p.x, p.x_row_stride, s.nheads * s.headdim);
  a.y_stride = checked_row_stride(op, "y", p.y, p.y_row_stride, s.nheads * s.headdim);
  a.bm_stride = checked_row_stride(op, "Bm", p.Bm, p.bm_row_stride, s.ngroups * s.dstate);
  a.cm_stride = checked_row_stride(op, "Cm", p.Cm, p.cm_row_stride, s.ngroups * s.dstate);
  return a;
}

inline SsdArgs backward_args(const SsdScanBackwardParams& p) {
  const char* op = "ssd_scan_backward";
  check_shape(op, p.shape);
  const SsdShape& s = p.shape;
  SsdArgs a = make_args(op, s, p.workspace, p.workspace_bytes);
  SG_CHECK(p.dt != nullptr && p.A != nullptr && p.ddt != nullptr && p.dA != nullptr,
           strprintf("%s: dt, A, ddt or dA is null", op));
  SG_CHECK(p.D == nullptr || p.dD != nullptr, strprintf("%s: D is given but dD is null", op));
  a.x = p.x, a.dt = p.dt, a.A = p.A, a.Bm = p.Bm, a.Cm = p.Cm, a.D = p.D, a.dy = p.dy;
  a.dx = p.dx, a.ddt = p.ddt, a.dA = p.dA, a.dD = p.D != nullptr ? p.dD : nullptr, a.dBm = p.dBm, a.dCm = p.dCm;
  const int64_t xw = s.nheads * s.headdim, bw = s.ngroups * s.dstate;
  a.x_stride = checked_row_stride(op, "x", p.x, p.x_row_stride, xw);
  a.dy_stride = checked_row_stride(op, "dy", p.dy, p.dy_row_stride, xw);
  a.dx_stride = checked_row_stride(op, "dx", p.dx, p.dx_row_stride, xw);
  a.bm_stride = checked_row_stride(op, "Bm", p.Bm, p.bm_row_stride, bw);
  a.cm_stride = checked_row_stride(op, "Cm", p.Cm, p.cm_row_stride, bw);
  a.dbm_stride = checked_row_stride(op, "dBm", p.dBm, p.dbm_row_stride, bw);
  a.dcm_stride = checked_row_stride(op, "dCm", p.dCm, p.dcm_row_stride, bw);
  return a;
}

template <int P, int N>
struct ForwardRunner {
  template <class Launch>
  static void run(const Launch& launch, const SsdArgs& a) { run_forward<P, N>(launch, a); }
};
template <int P, int N>
struct BackwardRunner {
  template <class Launch>
  static void run(const Launch& launch, const SsdArgs& a) { run_backward<P, N>(launch, a); }
};

// Runs Runner<64, dstate>::run(launch, args) (headdim 64 and dstate checked by check_shape).
template <template <int, int> class Runner, class Launch>
void dispatch_dstate(int64_t dstate, const Launch& launch, const SsdArgs& a) {
  switch (dstate) {
    case 16: Runner<64, 16>::run(launch, a); break;
    case 32: Runner<64, 32>::run(launch, a); break;
    case 64: Runner<64, 64>::run(launch, a); break;
    default: Runner<64, 128>::run(launch, a); break;
  }
}

#if !defined(SG_SIMT_EMULATION)
// Launch policy of the real launchers: <<<>>> on the stream, opting into > 48 KiB of dynamic shared memory
// (a host-side function attribute, not a stream operation: capturable).
struct CudaLaunch {
  cudaStream_t stream;
  template <class Kernel>
  void operator()(const char* name, Kernel kernel, dim3 grid, int threads, size_t smem_bytes, const SsdArgs& a) const {
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
    if (smem_bytes > 48 * 1024) {
      ::sg::cuda::set_max_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), name, smem_bytes);
    }
    kernel<<<grid, threads, smem_bytes, stream>>>(a);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) ::sg::cuda::throw_cuda_error(err, name, __FILE__, __LINE__);
  }
};
#endif

}  // namespace sg::kernels::ssd

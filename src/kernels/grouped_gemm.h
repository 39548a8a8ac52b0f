#pragma once
// Grouped GEMMs of the MoE experts, with the per-expert sizes read from device memory (graph-safe).
//
// The MoE layer permutes tokens so that expert g's rows are the contiguous segment
// [offsets[g], offsets[g] + counts[g]) of one activation buffer of max_total_rows rows (tokens x topk
// when dropless, experts x capacity with token-drop). counts/offsets are int32 DEVICE arrays written
// inside the step; the host never reads them. The expert weights are one flat bf16 buffer, expert g's
// [N, K] matrix (PyTorch Linear [out, in]) at w + g * N * K. Row-major everywhere; bf16 operands,
// fp32 accumulation. Three ops, each a plan class (CPU twin: reference/grouped_gemm.h):
//   GroupedLinearForward        y_g[m_g, N]  = x_g[m_g, K] W_g^T          bf16 out
//   GroupedLinearBackwardInput  dx_g[m_g, K] = dy_g[m_g, N] W_g           bf16 out (overwrites)
//   GroupedLinearBackwardWeight dW_g[N, K]  += dy_g^T x_g                  main_grad (beta = 1): fp32, or bf16
//                                                                          (GroupedGemmDims::weight_grad_dtype:
//                                                                          the fp32 sum rounded once, as stored)
//                               dW_g[N, K]   = dy_g^T x_g                  with accumulate = false (beta = 0)
// An expert with no rows writes no y/dx rows; its dW is left bit-for-bit unchanged when accumulating (it
// contributes zero) and set to zero when overwriting. Rows outside every segment (token-drop padding)
// are not written.
// Segments must not overlap. A malformed one (negative, or reaching past max_total_rows: an upstream bug)
// is clamped into [0, max_total_rows) on the device, so the kernels never touch memory outside the
// buffers; the CPU twin throws on it instead.
//
// Overwrite mode (accumulate = false) lets the first microbatch write main_grad instead of a memset plus an
// accumulate: the GEMM's epilogue then never reads dW (beta 0 skips the load of C), and extra blocks of
// the setup launch zero the dW of the empty experts (grouped_gemm_zero_fill.cuh), both reading the counts
// on the device: no launch of its own.
//
// Life cycle (static memory, docs/architecture.md):
//   plan time   construct with GroupedGemmDims -> workspace_bytes() (before the arena exists)
//               -> bind(workspace) on its final address -> initialize() once (synchronous).
//   step time   run(stream, params): ONE one-block setup kernel turns the device counts/offsets into
//               per-expert problem shapes and operand pointers inside the workspace, then ONE CUTLASS
//               grouped kernel reads them. No host sync, no allocation, no host read of the counts:
//               the same launches serve eager steps and graph capture/replay.
//               Or, for several GEMMs with the same counts (a MoE layer's): GroupedGemmSetup prepares all
//               their workspaces in ONE setup launch, then run_prepared(stream, params) launches each GEMM
//               alone (below).
// The workspace (problem shapes, pointer and stride arrays, CUTLASS's per-SM TMA descriptors) belongs
// to one plan; launches of one plan must be ordered (one stream).
//
// Kernel: CUTLASS 3.x Hopper ptr-array grouped GEMM (TMA + wgmma, warp-specialized cooperative,
// persistent), built for sm_90a only: the plans refuse other GPUs. Deterministic: every output tile is
// computed by one CTA in a fixed k order (no split-K, no atomics), so results are bitwise identical run
// to run. Requirements checked at plan time: N % 8 == 0 and K % 8 == 0 (TMA needs 16-byte aligned row
// strides and segment starts); at run time: 16-byte aligned base pointers.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cuda/bf16.h"
#include "kernels/float_buffer.h"
#include "kernels/grouped_gemm_tiles.h"

namespace sg::kernels {

// Plan-time constants of one expert linear layer.
struct GroupedGemmDims {
  int num_groups = 0;          // experts, >= 1
  int64_t max_total_rows = 0;  // rows of the permuted activation buffers, >= 1
  int64_t N = 0;               // out features (rows of each W_g), multiple of 8
  int64_t K = 0;               // in features (columns of each W_g), multiple of 8
  // backward_weight's tile: kAuto picks per shape (grouped_gemm_tiles.h); the others force one (tests, benches).
  WeightGradTile weight_grad_tile = WeightGradTile::kAuto;
  // backward_weight's dW: the main_grad's dtype (bf16 with ddp.grad_reduce_in_fp32=false); fp32 for the other ops.
  FloatDtype weight_grad_dtype = FloatDtype::fp32;
};

// y[r, :] = x[r, :] W_g^T for every row r of expert g's segment.
struct GroupedLinearForwardParams {
  bf16* y = nullptr;                 // [max_total_rows, N]
  const bf16* x = nullptr;           // [max_total_rows, K]
  const bf16* w = nullptr;           // [num_groups, N, K]
  const int32_t* counts = nullptr;   // [num_groups] device: rows of each expert
  const int32_t* offsets = nullptr;  // [num_groups] device: first row of each expert
};

// dx[r, :] = dy[r, :] W_g for every row r of expert g's segment (overwrites).
struct GroupedLinearBackwardInputParams {
  bf16* dx = nullptr;                // [max_total_rows, K]
  const bf16* dy = nullptr;          // [max_total_rows, N]
  const bf16* w = nullptr;           // [num_groups, N, K]
  const int32_t* counts = nullptr;   // [num_groups] device
  const int32_t* offsets = nullptr;  // [num_groups] device
};

// dW_g (+)= sum over the rows r of expert g's segment of dy[r, :]^T x[r, :] (summed in fp32).
struct GroupedLinearBackwardWeightParams {
  FloatBuffer dw;                    // [num_groups, N, K], the main_grad (of the plan's weight_grad_dtype)
  const bf16* dy = nullptr;          // [max_total_rows, N]
  const bf16* x = nullptr;           // [max_total_rows, K]
  const int32_t* counts = nullptr;   // [num_groups] device
  const int32_t* offsets = nullptr;  // [num_groups] device
  // true: dW_g += dy_g^T x_g (beta 1, empty experts unchanged). false: dW_g = dy_g^T x_g, zero for empty
  // experts; dW's previous contents are never read (may be uninitialized or NaN).
  bool accumulate = true;
};

enum class GroupedGemmOp { kForward, kBackwardInput, kBackwardWeight };
const char* grouped_gemm_op_name(GroupedGemmOp op);  // "forward", "backward_input", "backward_weight"

namespace detail {
class GroupedGemmBackend;
// The op's base pointers as the backend sees them (see grouped_gemm_backend.h for their meaning).
struct GroupedGemmOperands {
  const int32_t* counts = nullptr;
  const int32_t* offsets = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;
  void* d = nullptr;
  bool accumulate = false;  // backward_weight only: beta 1 (D += ...) instead of beta 0
  bool operator==(const GroupedGemmOperands&) const = default;
};
}  // namespace detail

class GroupedGemmSetup;

// What the three plans share: validation, the workspace, bind/initialize and the launch.
class GroupedGemmPlan {
 public:
  // Workspace alignment bind() requires (the arena's default alignment).
  static constexpr size_t kWorkspaceAlignment = 256;

  virtual ~GroupedGemmPlan();
  GroupedGemmPlan(const GroupedGemmPlan&) = delete;
  GroupedGemmPlan& operator=(const GroupedGemmPlan&) = delete;

  GroupedGemmOp op() const { return op_; }
  const GroupedGemmDims& dims() const { return dims_; }
  // "grouped forward (groups=8 rows=16384 N=1536 K=768)" for errors and logs.
  std::string describe() const;
  // The kernel configuration ("cutlass sm90a ptr-array cooperative tile 128x256x64 cluster 2x1x1").
  std::string kernel_name() const;

  // Device bytes bind() needs: known at construction, before any device memory exists.
  size_t workspace_bytes() const;
  // Fixes the workspace address (kWorkspaceAlignment-aligned, >= workspace_bytes(), owned by the
  // caller, e.g. an arena slot). Plan time; rebinding requires initialize() again.
  void bind(void* workspace, size_t bytes);
  // Plan time, after bind(): writes the stride arrays (synchronously) and runs CUTLASS's can_implement and
  // initialize on the fixed addresses. Throws sg::Error naming the plan when CUTLASS refuses.
  void initialize();
  bool initialized() const { return initialized_; }

 protected:
  // Plan time: validates dims (clear errors) and requires an sm_90 GPU; no device memory touched.
  GroupedGemmPlan(GroupedGemmOp op, const GroupedGemmDims& dims);
  // Step time: setup kernel (+ the zero-fill of empty experts in the same launch for a backward_weight
  // that overwrites) + grouped GEMM on `stream`. Throws (host-side checks only) when the plan is
  // not initialized or a pointer is null or not 16-byte aligned.
  void enqueue(cudaStream_t stream, const detail::GroupedGemmOperands& operands) const;
  // Step time: the grouped GEMM alone, on the arrays of this plan's last setup, which must have been for
  // these operands (a GroupedGemmSetup launch, or a run() since); throws otherwise.
  void enqueue_prepared(cudaStream_t stream, const detail::GroupedGemmOperands& operands) const;

 private:
  friend class GroupedGemmSetup;
  void check_operands(const detail::GroupedGemmOperands& operands) const;  // the host-side checks of enqueue

  GroupedGemmOp op_;
  GroupedGemmDims dims_;
  std::unique_ptr<detail::GroupedGemmBackend> backend_;
  void* workspace_ = nullptr;
  bool initialized_ = false;
  // The operands the workspace's arrays were last set up for, in stream order as enqueued on the host (the
  // order a graph capture records too).
  mutable std::optional<detail::GroupedGemmOperands> prepared_;
};

class GroupedLinearForward : public GroupedGemmPlan {
 public:
  explicit GroupedLinearForward(const GroupedGemmDims& dims);
  void run(cudaStream_t stream, const GroupedLinearForwardParams& p) const;
  // After a GroupedGemmSetup::launch with these params: the GEMM alone.
  void run_prepared(cudaStream_t stream, const GroupedLinearForwardParams& p) const;
};

class GroupedLinearBackwardInput : public GroupedGemmPlan {
 public:
  explicit GroupedLinearBackwardInput(const GroupedGemmDims& dims);
  void run(cudaStream_t stream, const GroupedLinearBackwardInputParams& p) const;
  // After a GroupedGemmSetup::launch with these params: the GEMM alone.
  void run_prepared(cudaStream_t stream, const GroupedLinearBackwardInputParams& p) const;
};

class GroupedLinearBackwardWeight : public GroupedGemmPlan {
 public:
  explicit GroupedLinearBackwardWeight(const GroupedGemmDims& dims);
  void run(cudaStream_t stream, const GroupedLinearBackwardWeightParams& p) const;
  // After a GroupedGemmSetup::launch with these params: the GEMM alone.
  void run_prepared(cudaStream_t stream, const GroupedLinearBackwardWeightParams& p) const;
};

// Several grouped GEMMs that read the same device counts and offsets (a MoE layer's: its forward's fc1 and fc2,
// its backward's dgrad and wgrad of both) set up in ONE launch instead of one each, which saves a launch and
// its wait (2-3 us on an H200) per GEMM. Host object, one per use:
//   kernels::GroupedGemmSetup setup;
//   setup.add(fc1, fc1_params).add(fc2, fc2_params);
//   setup.launch(stream);                 // one setup kernel writes both plans' arrays
//   fc1.run_prepared(stream, fc1_params);  // only fc1's GEMM
//   ...                                   // anything that does not rewrite the counts, offsets or the plans
//   fc2.run_prepared(stream, fc2_params);
// Each plan has one set of arrays: between its setup and its run_prepared() no run() or other setup of the same
// plan may come (run_prepared checks this on the host and throws). The counts and offsets must not change on the
// device in between either (the arrays were computed from them); the empty experts' dW is zeroed at the setup
// launch when a backward_weight overwrites. At most kMaxJobs plans, each added once.
class GroupedGemmSetup {
 public:
  static constexpr int kMaxJobs = 4;  // a MoE layer's backward: fc2 and fc1, dgrad and wgrad
  GroupedGemmSetup& add(const GroupedLinearForward& plan, const GroupedLinearForwardParams& p);
  GroupedGemmSetup& add(const GroupedLinearBackwardInput& plan, const GroupedLinearBackwardInputParams& p);
  GroupedGemmSetup& add(const GroupedLinearBackwardWeight& plan, const GroupedLinearBackwardWeightParams& p);
  // ONE setup launch on `stream` for every plan added; then each may run_prepared() with its params.
  void launch(cudaStream_t stream) const;

 private:
  GroupedGemmSetup& add(const GroupedGemmPlan& plan, const detail::GroupedGemmOperands& operands);
  std::vector<std::pair<const GroupedGemmPlan*, detail::GroupedGemmOperands>> jobs_;
};

}  // namespace sg::kernels

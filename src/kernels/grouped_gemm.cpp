#include "kernels/grouped_gemm.h"

#include <climits>
#include <cstdint>
#include <utility>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/arena.h"
#include "cuda/device.h"
#include "kernels/grouped_gemm_backend.h"
#include "kernels/shape_limits.h"

namespace sg::kernels {
namespace {

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

std::string describe_dims(GroupedGemmOp op, const GroupedGemmDims& d) {
  return strprintf("grouped GEMM %s (groups=%d rows=%lld N=%lld K=%lld%s)", grouped_gemm_op_name(op), d.num_groups,
                   static_cast<long long>(d.max_total_rows), static_cast<long long>(d.N),
                   static_cast<long long>(d.K), d.weight_grad_dtype == FloatDtype::bf16 ? " dW=bf16" : "");
}

void validate(GroupedGemmOp op, const GroupedGemmDims& d) {
  const std::string what = describe_dims(op, d) + ": ";
  SG_CHECK(d.num_groups >= 1, what + "num_groups must be at least 1");
  SG_CHECK(d.max_total_rows >= 1 && d.max_total_rows <= INT32_MAX,
           what + "max_total_rows must be in [1, 2^31) (rows and offsets are int32)");
  // The feature dimensions' alignment (kernels/shape_limits.h; validation checks the MoE sizes against it).
  for (const auto& [name, size] : {std::pair<const char*, int64_t>{"N", d.N}, {"K", d.K}}) {
    const std::string problem = grouped_gemm_dim_problem(size);
    SG_CHECK(problem.empty(), what + "N and K must be multiples of 8 in [8, 2^31) (pad the feature dimensions to a "
                                     "multiple of 8): " + name + " = " + problem);
  }
  SG_CHECK(op == GroupedGemmOp::kBackwardWeight || d.weight_grad_tile == WeightGradTile::kAuto,
           what + "weight_grad_tile = " + weight_grad_tile_name(d.weight_grad_tile) +
               " forces backward_weight's tile; leave it kAuto for the other ops");
  SG_CHECK(op == GroupedGemmOp::kBackwardWeight || d.weight_grad_dtype == FloatDtype::fp32,
           what + "weight_grad_dtype is backward_weight's dW dtype; leave it fp32 for the other ops");
}

int require_sm90(GroupedGemmOp op, const GroupedGemmDims& d) {
  cuda::require_device(describe_dims(op, d).c_str());
  const cuda::DeviceProperties& props = cuda::device_properties();
  if (props.compute_capability() != 90) {
    throw Error(describe_dims(op, d) + ": the CUTLASS grouped GEMM is built for sm_90a (Hopper: H100/H200) only, "
                "but the GPU is " + props.summary());
  }
  return props.sm_count;
}

std::unique_ptr<detail::GroupedGemmBackend> make_backend(GroupedGemmOp op, const GroupedGemmDims& d, int sm_count) {
  switch (op) {
    case GroupedGemmOp::kForward:
      return detail::make_grouped_forward_backend(d, sm_count);
    case GroupedGemmOp::kBackwardInput:
      return detail::make_grouped_backward_input_backend(d, sm_count);
    case GroupedGemmOp::kBackwardWeight: {
      const bool narrow = choose_weight_grad_tile(d, sm_count) == WeightGradTile::kNarrow;
      if (d.weight_grad_dtype == FloatDtype::bf16) {
        return narrow ? detail::make_grouped_backward_weight_narrow_bf16_backend(d, sm_count)
                      : detail::make_grouped_backward_weight_bf16_backend(d, sm_count);
      }
      return narrow ? detail::make_grouped_backward_weight_narrow_backend(d, sm_count)
                    : detail::make_grouped_backward_weight_backend(d, sm_count);
    }
  }
  throw Error("grouped GEMM: unknown op");
}

detail::GroupedGemmOperands operands_of(const GroupedLinearForwardParams& p) {
  return {.counts = p.counts, .offsets = p.offsets, .a = p.x, .b = p.w, .d = p.y};
}
detail::GroupedGemmOperands operands_of(const GroupedLinearBackwardInputParams& p) {
  return {.counts = p.counts, .offsets = p.offsets, .a = p.dy, .b = p.w, .d = p.dx};
}
detail::GroupedGemmOperands operands_of(const GroupedLinearBackwardWeight& plan,
                                        const GroupedLinearBackwardWeightParams& p) {
  SG_CHECK(p.dw.dtype == plan.dims().weight_grad_dtype,
           plan.describe() + strprintf(": planned for a %s dW, given a %s one",
                                       float_dtype_name(plan.dims().weight_grad_dtype), float_dtype_name(p.dw.dtype)));
  return {.counts = p.counts, .offsets = p.offsets, .a = p.dy, .b = p.x, .d = p.dw.data, .accumulate = p.accumulate};
}

}  // namespace

const char* grouped_gemm_op_name(GroupedGemmOp op) {
  switch (op) {
    case GroupedGemmOp::kForward:
      return "forward";
    case GroupedGemmOp::kBackwardInput:
      return "backward_input";
    case GroupedGemmOp::kBackwardWeight:
      return "backward_weight";
  }
  return "?";
}

GroupedGemmPlan::GroupedGemmPlan(GroupedGemmOp op, const GroupedGemmDims& dims) : op_(op), dims_(dims) {
  validate(op_, dims_);
  backend_ = make_backend(op_, dims_, require_sm90(op_, dims_));
}

GroupedGemmPlan::~GroupedGemmPlan() = default;

std::string GroupedGemmPlan::describe() const { return describe_dims(op_, dims_); }

std::string GroupedGemmPlan::kernel_name() const { return backend_->kernel_name(); }

size_t GroupedGemmPlan::workspace_bytes() const { return backend_->workspace_bytes(); }

void GroupedGemmPlan::bind(void* workspace, size_t bytes) {
  SG_CHECK(workspace != nullptr && reinterpret_cast<uintptr_t>(workspace) % kWorkspaceAlignment == 0,
           describe() + strprintf(": the workspace %p must be non-null and %zu-byte aligned", workspace,
                                  kWorkspaceAlignment));
  SG_CHECK(bytes >= workspace_bytes(),
           describe() + strprintf(": the workspace holds %zu bytes but the plan needs workspace_bytes() = %zu", bytes,
                                  workspace_bytes()));
  workspace_ = workspace;
  initialized_ = false;
  prepared_.reset();  // a new workspace holds no arrays yet
}

void GroupedGemmPlan::initialize() {
  SG_CHECK(workspace_ != nullptr, describe() + ": initialize() before bind(workspace)");
  cuda::check_host_sync_allowed("grouped GEMM initialize (plan time only)");
  backend_->initialize(workspace_);
  initialized_ = true;
}

void GroupedGemmPlan::check_operands(const detail::GroupedGemmOperands& o) const {
  if (!initialized_) throw Error(describe() + ": run() before bind(workspace) and initialize()");
  if (o.counts == nullptr || o.offsets == nullptr || o.a == nullptr || o.b == nullptr || o.d == nullptr ||
      !aligned16(o.a) || !aligned16(o.b) || !aligned16(o.d) || reinterpret_cast<uintptr_t>(o.counts) % 4 != 0 ||
      reinterpret_cast<uintptr_t>(o.offsets) % 4 != 0) {
    throw Error(describe() + strprintf(": operands must be non-null, the matrices 16-byte aligned (TMA) and "
                                       "counts/offsets int32 aligned: a=%p b=%p d=%p counts=%p offsets=%p",
                                       o.a, o.b, static_cast<const void*>(o.d), static_cast<const void*>(o.counts),
                                       static_cast<const void*>(o.offsets)));
  }
}

void GroupedGemmPlan::enqueue(cudaStream_t stream, const detail::GroupedGemmOperands& o) const {
  check_operands(o);
  backend_->run(stream, o);
  prepared_ = o;
}

void GroupedGemmPlan::enqueue_prepared(cudaStream_t stream, const detail::GroupedGemmOperands& o) const {
  check_operands(o);
  if (prepared_ != o) {
    throw Error(describe() + ": run_prepared() with operands this plan was not last set up for: launch a "
                             "GroupedGemmSetup with these params first (and no run() or other setup of this plan "
                             "in between: the plan has one set of arrays)");
  }
  backend_->run_gemm(stream, o.accumulate);
}

GroupedLinearForward::GroupedLinearForward(const GroupedGemmDims& dims)
    : GroupedGemmPlan(GroupedGemmOp::kForward, dims) {}

void GroupedLinearForward::run(cudaStream_t stream, const GroupedLinearForwardParams& p) const {
  enqueue(stream, operands_of(p));
}

void GroupedLinearForward::run_prepared(cudaStream_t stream, const GroupedLinearForwardParams& p) const {
  enqueue_prepared(stream, operands_of(p));
}

GroupedLinearBackwardInput::GroupedLinearBackwardInput(const GroupedGemmDims& dims)
    : GroupedGemmPlan(GroupedGemmOp::kBackwardInput, dims) {}

void GroupedLinearBackwardInput::run(cudaStream_t stream, const GroupedLinearBackwardInputParams& p) const {
  enqueue(stream, operands_of(p));
}

void GroupedLinearBackwardInput::run_prepared(cudaStream_t stream,
                                              const GroupedLinearBackwardInputParams& p) const {
  enqueue_prepared(stream, operands_of(p));
}

GroupedLinearBackwardWeight::GroupedLinearBackwardWeight(const GroupedGemmDims& dims)
    : GroupedGemmPlan(GroupedGemmOp::kBackwardWeight, dims) {}

void GroupedLinearBackwardWeight::run(cudaStream_t stream, const GroupedLinearBackwardWeightParams& p) const {
  enqueue(stream, operands_of(*this, p));
}

void GroupedLinearBackwardWeight::run_prepared(cudaStream_t stream,
                                               const GroupedLinearBackwardWeightParams& p) const {
  enqueue_prepared(stream, operands_of(*this, p));
}

GroupedGemmSetup& GroupedGemmSetup::add(const GroupedGemmPlan& plan, const detail::GroupedGemmOperands& o) {
  plan.check_operands(o);
  SG_CHECK(static_cast<int>(jobs_.size()) < kMaxJobs,
           plan.describe() + strprintf(": a GroupedGemmSetup takes at most %d plans", kMaxJobs));
  for (const auto& job : jobs_) {
    SG_CHECK(job.first != &plan,
             plan.describe() + ": added twice to one GroupedGemmSetup (a plan has one set of arrays)");
  }
  jobs_.emplace_back(&plan, o);
  return *this;
}

GroupedGemmSetup& GroupedGemmSetup::add(const GroupedLinearForward& plan, const GroupedLinearForwardParams& p) {
  return add(static_cast<const GroupedGemmPlan&>(plan), operands_of(p));
}
GroupedGemmSetup& GroupedGemmSetup::add(const GroupedLinearBackwardInput& plan,
                                        const GroupedLinearBackwardInputParams& p) {
  return add(static_cast<const GroupedGemmPlan&>(plan), operands_of(p));
}
GroupedGemmSetup& GroupedGemmSetup::add(const GroupedLinearBackwardWeight& plan,
                                        const GroupedLinearBackwardWeightParams& p) {
  return add(static_cast<const GroupedGemmPlan&>(plan), operands_of(plan, p));
}

void GroupedGemmSetup::launch(cudaStream_t stream) const {
  SG_CHECK(!jobs_.empty(), "GroupedGemmSetup::launch: no plan was added");
  detail::GroupedGemmSetupJob jobs[kMaxJobs];
  for (size_t j = 0; j < jobs_.size(); ++j) jobs[j] = jobs_[j].first->backend_->setup_job(jobs_[j].second);
  detail::launch_grouped_gemm_setup(stream, jobs, static_cast<int>(jobs_.size()));
  for (const auto& [plan, operands] : jobs_) plan->prepared_ = operands;
}

}  // namespace sg::kernels

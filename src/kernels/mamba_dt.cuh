#pragma once
// Kernels and launch sequences of dt = clamp(softplus(dt_raw + dt_bias)) and A = -exp(A_log)
// (kernels/mamba_dt.h), written over a launch policy so the CPU emulator of the tests runs the same code as
// the launchers (detail::CudaLaunch).
#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/common.cuh"
#include "kernels/launch_checks.h"
#include "kernels/mamba_dt.h"
#include "kernels/partial_sums.cuh"
#include "kernels/silu.cuh"

namespace sg::kernels::mamba_dt {
SG_EMULATED_NAMESPACE_BEGIN

inline constexpr int kThreads = 256;
inline constexpr int64_t kMaxBlocks = 1 << 16;
// Backward: block = 32 heads x 8 token slots (thread t: head t % 32, slot t / 32); at most kMaxSlots slots.
inline constexpr int kHeadsPerBlock = 32, kSlotsPerBlock = 8;
inline constexpr int64_t kMaxSlots = 1024;

SG_HOST_DEVICE int64_t elementwise_blocks(int64_t n) {
  const int64_t blocks = detail::ceil_div(n, kThreads);
  return blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks);
}

SG_HOST_DEVICE int64_t backward_partials(int64_t T) {
  return detail::ceil_div(T < kMaxSlots ? T : kMaxSlots, kSlotsPerBlock);
}

// mamba_ssm's softplus: identity above 20.
SG_DEVICE float softplus(float x) { return x <= 20.0f ? log1pf(expf(x)) : x; }
SG_DEVICE float softplus_grad(float x) { return x <= 20.0f ? detail::sigmoid(x) : 1.0f; }

SG_KERNEL(kThreads) dt_forward_kernel(MambaDtForwardParams p) {
  const int64_t total = p.T * p.H;
  const int64_t stride = elementwise_blocks(total) * kThreads;
  for (int64_t i = static_cast<int64_t>(detail::block_index_x()) * kThreads + detail::thread_index(); i < total;
       i += stride) {
    const int64_t t = i / p.H, h = i - t * p.H;
    const float sp = softplus(__bfloat162float(p.dt_raw[t * p.dt_raw_row_stride + h]) + p.dt_bias[h]);
    p.dt[i] = fminf(fmaxf(sp, p.dt_min), p.dt_max);
  }
}

// Slot (block_y * 8 + t / 32) sums the tokens slot, slot + num_slots, ... of its head; the block's 8 slots
// are added in order into partial row block_y.
SG_KERNEL(kHeadsPerBlock * kSlotsPerBlock) dt_backward_kernel(MambaDtBackwardParams p) {
  float(*slot_sums)[kHeadsPerBlock] = reinterpret_cast<float(*)[kHeadsPerBlock]>(detail::dynamic_smem());
  const int tx = detail::thread_index() % kHeadsPerBlock, ty = detail::thread_index() / kHeadsPerBlock;
  const int64_t h = static_cast<int64_t>(detail::block_index_x()) * kHeadsPerBlock + tx;
  const int64_t num_slots = backward_partials(p.T) * kSlotsPerBlock;
  float acc = 0.0f;
  if (h < p.H) {
    const float bias = p.dt_bias[h];
    for (int64_t t = static_cast<int64_t>(detail::block_index_y()) * kSlotsPerBlock + ty; t < p.T; t += num_slots) {
      const float pre = __bfloat162float(p.dt_raw[t * p.dt_raw_row_stride + h]) + bias;
      const float sp = softplus(pre);
      const bool clipped = sp < p.dt_min || sp > p.dt_max;
      const float d = clipped ? 0.0f : p.ddt[t * p.H + h] * softplus_grad(pre);
      p.ddt_raw[t * p.ddt_raw_row_stride + h] = __float2bfloat16_rn(d);
      acc += d;
    }
  }
  slot_sums[ty][tx] = acc;
  detail::block_sync();
  if (ty == 0 && h < p.H) {
    float total = 0.0f;
SG_UNROLL
    for (int y = 0; y < kSlotsPerBlock; ++y) total += slot_sums[y][tx];
    p.scratch[static_cast<int64_t>(detail::block_index_y()) * p.H + h] = total;
  }
}

SG_KERNEL(kThreads) a_forward_kernel(MambaAForwardParams p) {
  const int64_t h = static_cast<int64_t>(detail::block_index_x()) * kThreads + detail::thread_index();
  if (h < p.H) p.A[h] = -expf(p.A_log[h]);
}

SG_KERNEL(kThreads) a_backward_kernel(MambaABackwardParams p) {
  const int64_t h = static_cast<int64_t>(detail::block_index_x()) * kThreads + detail::thread_index();
  if (h >= p.H) return;
  detail::add_into(p.dA_log, h, p.dA[h] * -expf(p.A_log[h]));
}

inline void check_shape(const char* op, int64_t T, int64_t H, float dt_min, float dt_max) {
  SG_CHECK(T >= 0 && H > 0, strprintf("%s: bad shape T=%lld H=%lld (T >= 0, H > 0)", op, static_cast<long long>(T),
                                      static_cast<long long>(H)));
  SG_CHECK(dt_min <= dt_max, strprintf("%s: dt_limit = (%g, %g): need dt_limit[0] <= dt_limit[1]", op,
                                       static_cast<double>(dt_min), static_cast<double>(dt_max)));
}

template <class Launch>
void run_dt_forward(const Launch& launch, MambaDtForwardParams p) {
  const char* op = "mamba_dt_forward";
  check_shape(op, p.T, p.H, p.dt_min, p.dt_max);
  p.dt_raw_row_stride = detail::resolve_row_stride(op, "dt_raw_row_stride", p.dt_raw_row_stride, p.H);
  SG_CHECK(p.dt && p.dt_raw && p.dt_bias, strprintf("%s: null pointer in params", op));
  if (p.T == 0) return;
  launch("dt_forward_kernel", dt_forward_kernel, dim3(static_cast<unsigned>(elementwise_blocks(p.T * p.H))),
         kThreads, 0, p);
}

template <class Launch>
void run_dt_backward(const Launch& launch, MambaDtBackwardParams p) {
  const char* op = "mamba_dt_backward";
  check_shape(op, p.T, p.H, p.dt_min, p.dt_max);
  p.dt_raw_row_stride = detail::resolve_row_stride(op, "dt_raw_row_stride", p.dt_raw_row_stride, p.H);
  p.ddt_raw_row_stride = detail::resolve_row_stride(op, "ddt_raw_row_stride", p.ddt_raw_row_stride, p.H);
  SG_CHECK(p.ddt_raw && p.ddt_bias.data && p.ddt && p.dt_raw && p.dt_bias, strprintf("%s: null pointer in params", op));
  if (p.T == 0) return;
  const int64_t partials = backward_partials(p.T);
  detail::check_scratch(op, p.scratch, p.scratch_bytes, static_cast<size_t>(partials * p.H) * sizeof(float),
                        strprintf("T=%lld H=%lld", static_cast<long long>(p.T), static_cast<long long>(p.H)),
                        "mamba_dt_backward_scratch_bytes(T, H)");
  const dim3 grid(static_cast<unsigned>(detail::ceil_div(p.H, kHeadsPerBlock)), static_cast<unsigned>(partials));
  launch("dt_backward_kernel", dt_backward_kernel, grid, kHeadsPerBlock * kSlotsPerBlock,
         sizeof(float) * kSlotsPerBlock * kHeadsPerBlock, p);
  partial_sums::run_column_sums(launch, p.scratch, partials, {{p.ddt_bias, p.H}});
}

template <class Launch>
void run_a_forward(const Launch& launch, const MambaAForwardParams& p) {
  SG_CHECK(p.H > 0 && p.A && p.A_log, "mamba_a_forward: need H > 0 and non-null A, A_log");
  launch("a_forward_kernel", a_forward_kernel, dim3(static_cast<unsigned>(detail::ceil_div(p.H, kThreads))),
         kThreads, 0, p);
}

template <class Launch>
void run_a_backward(const Launch& launch, const MambaABackwardParams& p) {
  SG_CHECK(p.H > 0 && p.dA_log.data && p.dA && p.A_log, "mamba_a_backward: need H > 0 and non-null dA_log, dA, A_log");
  launch("a_backward_kernel", a_backward_kernel, dim3(static_cast<unsigned>(detail::ceil_div(p.H, kThreads))),
         kThreads, 0, p);
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::mamba_dt

#pragma once
// Kernel and launch sequence of the squared ReLU (kernels/squared_relu.h), written over a launch policy so
// the CPU emulator of the tests runs the same code as the launchers (detail::CudaLaunch).
#include "core/error.h"
#include "core/strings.h"
#include "kernels/common.cuh"
#include "kernels/squared_relu.h"

namespace sg::kernels::squared_relu {
SG_EMULATED_NAMESPACE_BEGIN

inline constexpr int kThreads = 256;
inline constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride beyond this

struct Args {
  bf16* dst = nullptr;
  const bf16* in = nullptr;
  const bf16* dout = nullptr;  // backward only
  int64_t n = 0;
};

SG_HOST_DEVICE int64_t blocks_for(int64_t chunks) {
  const int64_t blocks = detail::ceil_div(chunks, kThreads);
  return blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks);
}

// relu(x)^2 in fp32 (the decoding linear's fused epilogue uses it too).
SG_DEVICE float value(float x) {
  const float r = fmaxf(x, 0.0f);
  return r * r;
}

// One thread per VEC values (grid-stride). BACKWARD: dst = dout * 2 relu(in); else dst = relu(in)^2.
template <int VEC, bool BACKWARD>
SG_KERNEL(kThreads) squared_relu_kernel(Args a) {
  const int64_t chunks = a.n / VEC;
  const int64_t stride = blocks_for(chunks) * kThreads;
  for (int64_t i = static_cast<int64_t>(detail::block_index_x()) * kThreads + detail::thread_index(); i < chunks;
       i += stride) {
    float x[VEC];
    detail::load_bf16<VEC>(a.in + i * VEC, x);
    if constexpr (BACKWARD) {
      float g[VEC];
      detail::load_bf16<VEC>(a.dout + i * VEC, g);
SG_UNROLL
      for (int k = 0; k < VEC; ++k) x[k] = g[k] * (2.0f * fmaxf(x[k], 0.0f));
    } else {
SG_UNROLL
      for (int k = 0; k < VEC; ++k) x[k] = value(x[k]);
    }
    detail::store_bf16<VEC>(a.dst + i * VEC, x);
  }
}

template <bool BACKWARD, class Launch>
void run(const Launch& launch, const char* op, const Args& a, int64_t T, int64_t F) {
  SG_CHECK(T >= 0 && F > 0, strprintf("%s: bad shape T=%lld F=%lld (T >= 0, F > 0)", op, static_cast<long long>(T),
                                      static_cast<long long>(F)));
  SG_CHECK(a.dst && a.in && (!BACKWARD || a.dout), strprintf("%s: null pointer in params", op));
  if (a.n == 0) return;
  const bool vec = a.n % detail::kBf16PerVec == 0 && detail::is_aligned(a.dst, 16) && detail::is_aligned(a.in, 16) &&
                   (!BACKWARD || detail::is_aligned(a.dout, 16));
  if (vec) {
    const dim3 grid(static_cast<unsigned>(blocks_for(a.n / detail::kBf16PerVec)));
    launch("squared_relu_kernel", squared_relu_kernel<detail::kBf16PerVec, BACKWARD>, grid, kThreads, 0, a);
  } else {
    const dim3 grid(static_cast<unsigned>(blocks_for(a.n)));
    launch("squared_relu_kernel", squared_relu_kernel<1, BACKWARD>, grid, kThreads, 0, a);
  }
}

template <class Launch>
void run_forward(const Launch& launch, const SquaredReluForwardParams& p) {
  run<false>(launch, "squared_relu_forward", Args{.dst = p.out, .in = p.in, .n = p.T * p.F}, p.T, p.F);
}

template <class Launch>
void run_backward(const Launch& launch, const SquaredReluBackwardParams& p) {
  run<true>(launch, "squared_relu_backward", Args{.dst = p.din, .in = p.in, .dout = p.dout, .n = p.T * p.F}, p.T,
            p.F);
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::squared_relu

// kernels/swiglu_backward_gemm.h: the production configuration of the CUTLASS kernel (swiglu_gemm_cutlass.cuh)
// and the plan class.
#include <memory>
#include <string>
#include <utility>

#include "core/error.h"
#include "kernels/swiglu_backward_gemm.h"
#include "kernels/swiglu_gemm_cutlass.cuh"

namespace sg::kernels {
namespace {

// Tile 128x128x64, CUTLASS's epilogue subtile (128x32), cluster 2x1 (swiglu_backward_gemm.h says why).
using ProductionFusion = detail::swiglu_gemm::Backward<detail::swiglu_gemm::Config<128, 128, 0, 0, 2>>;

}  // namespace

struct SwiGluBackwardGemm::Impl {
  Impl(int64_t T, int64_t H, int64_t F, int sm_count, std::string what)
      : runner(T, H, F, sm_count, std::move(what)) {}
  detail::swiglu_gemm::Runner<ProductionFusion> runner;
};

SwiGluBackwardGemm::SwiGluBackwardGemm(int64_t T, int64_t H, int64_t F) {
  const std::string what = swiglu_gemm_describe(T, H, F);
  const int sm_count = swiglu_gemm_check_plan(what, T, H, F);
  impl_ = std::make_unique<Impl>(T, H, F, sm_count, what);
}

SwiGluBackwardGemm::~SwiGluBackwardGemm() = default;

void SwiGluBackwardGemm::run(cudaStream_t stream, const SwiGluBackwardGemmParams& p) { impl_->runner.run(stream, p); }

}  // namespace sg::kernels

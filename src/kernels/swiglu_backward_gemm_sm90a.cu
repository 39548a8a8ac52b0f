// kernels/swiglu_backward_gemm.h: the CUTLASS 3.x sm_90a instantiation (the only one: built with -DNDEBUG
// for sm_90a alone, like the grouped GEMM's files).
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "kernels/silu.cuh"
#include "kernels/swiglu_backward_gemm.h"

namespace sg::kernels {
namespace {

using namespace cute;
using Bf16 = cutlass::bfloat16_t;

// du = dh g sig(g), dh the accumulator rounded to bf16: kernels::swiglu_backward's expression, term for term.
template <class T>
struct UpGrad {
  CUTLASS_DEVICE T operator()(T const& acc, T const& g) const {
    T out;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < int(T::kElements); ++i) {
      const float dh = float(Bf16(acc[i]));
      const float sig = detail::sigmoid(g[i]);
      out[i] = dh * g[i] * sig;
    }
    return out;
  }
};

// dg = dh up sig(g) (1 + g (1 - sig(g))); the first input is du, passed through the auxiliary store.
template <class T>
struct GateGrad {
  CUTLASS_DEVICE T operator()(T const& /*du*/, T const& acc, T const& g, T const& u) const {
    T out;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < int(T::kElements); ++i) {
      const float dh = float(Bf16(acc[i]));
      const float sig = detail::sigmoid(g[i]);
      out[i] = dh * u[i] * sig * (1.0f + g[i] * (1.0f - sig));
    }
    return out;
  }
};

using TileShape = Shape<_128, _128, _64>;
using ClusterShape = Shape<_2, _1, _1>;
using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
using EpilogueTileType = cutlass::epilogue::collective::EpilogueTileAuto;  // 128x32
using LayoutA = cutlass::layout::RowMajor;                                 // dy [T, H]: K-major
using LayoutB = cutlass::layout::RowMajor;                                 // W_down [H, F] as B(k, n): N-major
using LayoutD = cutlass::layout::RowMajor;  // dg, du, g, u: [T, F] views with row stride 2F
constexpr int kAlign = 8;                   // 16-byte rows for TMA
constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;

using EpiDesc = cutlass::epilogue::collective::detail::EpilogueDescriptor<TileShape, EpilogueTileType, void, Bf16,
                                                                           EpilogueSchedule>;
using AuxLoadDesc = cutlass::epilogue::collective::detail::AuxLoadDescriptor<EpiDesc, LayoutD, Bf16>;
using AuxStoreDesc = cutlass::epilogue::collective::detail::AuxStoreDescriptor<EpiDesc, LayoutD, Bf16>;
using AuxLoad = cutlass::epilogue::fusion::Sm90AuxLoad<AuxLoadDesc::Stages, typename EpiDesc::EpilogueTile, Bf16,
                                                       typename AuxLoadDesc::Stride,
                                                       typename AuxLoadDesc::SmemLayoutAtom,
                                                       typename AuxLoadDesc::CopyOpS2R>;
using AuxStore = cutlass::epilogue::fusion::Sm90AuxStore<AuxStoreDesc::Stages, typename EpiDesc::EpilogueTile, Bf16,
                                                         kRound, typename AuxStoreDesc::Stride,
                                                         typename AuxStoreDesc::SmemLayoutAtom,
                                                         typename AuxStoreDesc::CopyOpR2S>;
// A graph, not a tree, so g is loaded once: nodes in topological order 0 acc, 1 g, 2 u, 3 du, 4 store(du),
// 5 dg (the output D).
using Callbacks = cutlass::epilogue::fusion::Sm90TopologicalVisitor<
    float, cute::tuple<cute::seq<>, cute::seq<>, cute::seq<>, cute::seq<0, 1>, cute::seq<3>, cute::seq<4, 0, 1, 2>>,
    cutlass::epilogue::fusion::Sm90AccFetch, AuxLoad, AuxLoad,
    cutlass::epilogue::fusion::Sm90Compute<UpGrad, Bf16, float, kRound>, AuxStore,
    cutlass::epilogue::fusion::Sm90Compute<GateGrad, Bf16, float, kRound>>;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape, EpilogueTileType, float, float,
    void, LayoutD, kAlign, Bf16, LayoutD, kAlign, EpilogueSchedule, Callbacks>::CollectiveOp;
using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Bf16, LayoutA, kAlign, Bf16, LayoutB, kAlign, float,
    TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename CollectiveEpilogue::SharedStorage))>,
    KernelSchedule>::CollectiveOp;
using GemmKernel =
    cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

std::string describe(int64_t T, int64_t H, int64_t F) {
  return strprintf("SwiGLU backward GEMM (T=%lld, H=%lld, F=%lld)", static_cast<long long>(T),
                   static_cast<long long>(H), static_cast<long long>(F));
}

void check(cutlass::Status s, const std::string& what) {
  SG_CHECK(s == cutlass::Status::kSuccess, what + ": " + cutlass::cutlassGetStatusString(s));
}

enum class Policy { kNever, kWherePays, kAlways };

// STEPGRAPH_SWIGLU_BACKWARD_GEMM, read at each plan (tests switch it): unset or 1 = where it pays, 0 = never,
// always = wherever the kernel supports the shape (tests and measurements).
Policy policy_from_environment() {
  const char* v = std::getenv("STEPGRAPH_SWIGLU_BACKWARD_GEMM");
  if (v == nullptr || std::string(v) == "1") return Policy::kWherePays;
  if (std::string(v) == "0") return Policy::kNever;
  if (std::string(v) == "always") return Policy::kAlways;
  throw Error(std::string("STEPGRAPH_SWIGLU_BACKWARD_GEMM='") + v +
              "': must be 1 (the fused SwiGLU backward GEMM where it pays; the default), 0 (never) or always");
}

bool shape_supported(int64_t T, int64_t H, int64_t F) {
  return T > 0 && H > 0 && F > 0 && H % kAlign == 0 && F % kAlign == 0 && T <= INT32_MAX && H <= INT32_MAX &&
         F <= INT32_MAX / 2;
}

}  // namespace

bool swiglu_backward_gemm_preferred(int64_t T, int64_t H, int64_t F) {
  const Policy policy = policy_from_environment();
  if (policy == Policy::kNever || !shape_supported(T, H, F)) return false;
  if (cuda::device_count() == 0 || cuda::device_properties().compute_capability() != 90) return false;
  if (policy == Policy::kAlways) return true;
  const int64_t tiles = (T + 127) / 128 * ((F + 127) / 128);
  return H <= 1024 && tiles >= cuda::device_properties().sm_count;
}

struct SwiGluBackwardGemm::Impl {
  int64_t T = 0, H = 0, F = 0;
  std::string what;  // describe(T, H, F), for errors
  int sm_count = 0;
  Gemm gemm;
  SwiGluBackwardGemmParams bound{};  // the pointers gemm was initialized with
  bool initialized = false;
};

SwiGluBackwardGemm::SwiGluBackwardGemm(int64_t T, int64_t H, int64_t F) : impl_(new Impl) {
  const std::string what = describe(T, H, F);
  SG_CHECK(shape_supported(T, H, F), what + ": needs T, H, F > 0 and H, F multiples of 8 (16-byte rows)");
  cuda::require_device(what.c_str());
  const cuda::DeviceProperties& props = cuda::device_properties();
  SG_CHECK(props.compute_capability() == 90,
           what + ": built for sm_90a (Hopper: H100/H200) only, but the GPU is " + props.summary());
  impl_->T = T;
  impl_->H = H;
  impl_->F = F;
  impl_->what = what;
  impl_->sm_count = props.sm_count;
}

SwiGluBackwardGemm::~SwiGluBackwardGemm() = default;

void SwiGluBackwardGemm::run(cudaStream_t stream, const SwiGluBackwardGemmParams& p) {
  Impl& s = *impl_;
  const std::string& what = s.what;
  SG_CHECK(p.d_gate_up && p.dy && p.w_down && p.gate_up, what + ": null pointer in params");
  for (const void* ptr : {static_cast<const void*>(p.d_gate_up), static_cast<const void*>(p.dy),
                          static_cast<const void*>(p.w_down), static_cast<const void*>(p.gate_up)}) {
    SG_CHECK(reinterpret_cast<uintptr_t>(ptr) % 16 == 0, what + ": every pointer must be 16-byte aligned (TMA)");
  }
  const bool same = s.initialized && s.bound.d_gate_up == p.d_gate_up && s.bound.dy == p.dy &&
                    s.bound.w_down == p.w_down && s.bound.gate_up == p.gate_up;
  if (!same) {  // host only: CUTLASS's kernel parameters (TMA descriptors) for these addresses
    const int M = static_cast<int>(s.T), N = static_cast<int>(s.F), K = static_cast<int>(s.H);
    using StrideA = typename GemmKernel::StrideA;
    using StrideB = typename GemmKernel::StrideB;
    using StrideD = typename GemmKernel::StrideD;
    const StrideA sa = cutlass::make_cute_packed_stride(StrideA{}, make_shape(M, K, 1));
    const StrideB sb = cutlass::make_cute_packed_stride(StrideB{}, make_shape(N, K, 1));
    StrideD sd{};  // [T, F] views of the [T, 2F] buffers
    get<0>(sd) = 2 * s.F;
    get<2>(sd) = int64_t(M) * 2 * s.F;
    typename AuxLoadDesc::Stride s_aux{};
    get<0>(s_aux) = 2 * s.F;
    get<2>(s_aux) = int64_t(M) * 2 * s.F;
    auto* gu = reinterpret_cast<const Bf16*>(p.gate_up);
    auto* dgu = reinterpret_cast<Bf16*>(p.d_gate_up);
    typename Callbacks::Arguments callbacks{{}, {gu, Bf16(0), s_aux}, {gu + s.F, Bf16(0), s_aux},
                                            {}, {dgu + s.F, s_aux},       {}};
    auto* dy = reinterpret_cast<const Bf16*>(p.dy);
    auto* w = reinterpret_cast<const Bf16*>(p.w_down);
    typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                  {M, N, K, 1},
                                  {dy, sa, w, sb},
                                  {callbacks, nullptr, sd, dgu, sd},
                                  cutlass::KernelHardwareInfo{0, s.sm_count}};
    check(s.gemm.can_implement(args), what + ": CUTLASS refuses the problem");
    // The non-stream-K persistent scheduler and this epilogue need no workspace; a CUTLASS that did would
    // need one planned in the arena, so say so instead of passing a null pointer.
    SG_CHECK(Gemm::get_workspace_size(args) == 0, what + ": CUTLASS asks for a workspace, which is not planned");
    check(s.gemm.initialize(args, nullptr, stream), what + ": CUTLASS initialize");
    s.bound = p;
    s.initialized = true;
  }
  check(s.gemm.run(stream), what + ": launch");
  SG_CUDA_CHECK_LAUNCH("swiglu_backward_gemm");
}

}  // namespace sg::kernels

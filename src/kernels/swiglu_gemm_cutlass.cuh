#pragma once
// Internal to kernels/swiglu_backward_gemm: the CUTLASS 3.x sm_90a GEMM with SwiGLU's backward in its epilogue,
// as a template over the tile, epilogue subtile and cluster, and a runner that builds CUTLASS's parameters for
// given pointers. swiglu_backward_gemm_sm90a.cu instantiates production's configuration; the opt-in
// bench/swiglu_backward_gemm_variants instantiates others. Include from *_sm90a.cu files only (built for sm_90a
// alone, with -DNDEBUG).
//
// The epilogue is a visitor graph (Sm90TopologicalVisitor, so g is loaded once) over the [T, F] halves of the
// [T, 2F] gate_up and d_gate_up buffers (row stride 2F), read and written by TMA beside the accumulators
// (acc = dh): load g and u, store du as an auxiliary output, D = dg.
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/silu.cuh"
#include "kernels/swiglu_backward_gemm.h"

namespace sg::kernels::detail::swiglu_gemm {

using Bf16 = cutlass::bfloat16_t;
constexpr int kAlign = 8;  // 16-byte rows for TMA
constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;

// ---- The epilogue's arithmetic: kernels::swiglu_backward's expression, term for term, on dh rounded to bf16
// (the unfused path stores it as bf16 first). ----

// du = dh g sig(g).
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

// ---- One configuration: CTA tile TileM x TileN x 64, epilogue subtile EpiM x EpiN (0 x 0: CUTLASS's choice),
// cluster ClusterM x 1, warp-specialized cooperative. ----
template <int TileM, int TileN, int EpiM, int EpiN, int ClusterM>
struct Config {
  using TileShape = cute::Shape<cute::Int<TileM>, cute::Int<TileN>, cute::_64>;
  using ClusterShape = cute::Shape<cute::Int<ClusterM>, cute::_1, cute::_1>;
  using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
  using EpilogueTileType = std::conditional_t<EpiM == 0, cutlass::epilogue::collective::EpilogueTileAuto,
                                              cute::Shape<cute::Int<EpiM>, cute::Int<EpiN>>>;
  using LayoutA = cutlass::layout::RowMajor;    // dy [T, H]: K-major
  using LayoutAux = cutlass::layout::RowMajor;  // the [T, F] halves of gate_up and d_gate_up
  using EpiDesc = cutlass::epilogue::collective::detail::EpilogueDescriptor<TileShape, EpilogueTileType, void, Bf16,
                                                                             EpilogueSchedule>;
  using AuxLoadDesc = cutlass::epilogue::collective::detail::AuxLoadDescriptor<EpiDesc, LayoutAux, Bf16>;
  using AuxStoreDesc = cutlass::epilogue::collective::detail::AuxStoreDescriptor<EpiDesc, LayoutAux, Bf16>;
  using AuxLoad = cutlass::epilogue::fusion::Sm90AuxLoad<AuxLoadDesc::Stages, typename EpiDesc::EpilogueTile, Bf16,
                                                         typename AuxLoadDesc::Stride,
                                                         typename AuxLoadDesc::SmemLayoutAtom,
                                                         typename AuxLoadDesc::CopyOpS2R>;
  using AuxStore = cutlass::epilogue::fusion::Sm90AuxStore<AuxStoreDesc::Stages, typename EpiDesc::EpilogueTile,
                                                           Bf16, kRound, typename AuxStoreDesc::Stride,
                                                           typename AuxStoreDesc::SmemLayoutAtom,
                                                           typename AuxStoreDesc::CopyOpR2S>;
  using AuxStride = typename AuxLoadDesc::Stride;

  static std::string name() {
    const std::string epilogue =
        EpiM == 0 ? "CUTLASS's epilogue subtile" : strprintf("epilogue subtile %dx%d", EpiM, EpiN);
    return strprintf("cooperative %dx%dx64, cluster %dx1, %s", TileM, TileN, ClusterM, epilogue.c_str());
  }
};

// The GEMM of configuration Cfg with B in LayoutB and epilogue Callbacks; D is bf16 row-major.
template <class Cfg, class LayoutB, class Callbacks>
struct GemmOf {
  using LayoutD = cutlass::layout::RowMajor;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, typename Cfg::TileShape, typename Cfg::ClusterShape,
      typename Cfg::EpilogueTileType, float, float, void, LayoutD, kAlign, Bf16, LayoutD, kAlign,
      typename Cfg::EpilogueSchedule, Callbacks>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Bf16, typename Cfg::LayoutA, kAlign, Bf16, LayoutB, kAlign,
      float, typename Cfg::TileShape, typename Cfg::ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      typename Cfg::KernelSchedule>::CollectiveOp;
  using GemmKernel =
      cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
};

// A [T, F] view with row stride `row` (elements), as CUTLASS's (M, N, L) stride.
template <class Stride>
Stride rows_of(int64_t row, int64_t T) {
  Stride s{};
  cute::get<0>(s) = row;
  cute::get<2>(s) = T * row;
  return s;
}

// ---- The fusion: the GEMM's operands and epilogue, and the parameters they are built from. ----

// d_gate_up = [dg | du] from dh = dy [T, H] W_down [H, F] (B = W_down, N-major).
template <class Cfg>
struct Backward {
  using Configuration = Cfg;
  using Params = SwiGluBackwardGemmParams;
  // Nodes in topological order: 0 acc, 1 g, 2 u, 3 du, 4 store(du), 5 dg (the output D).
  using Callbacks = cutlass::epilogue::fusion::Sm90TopologicalVisitor<
      float, cute::tuple<cute::seq<>, cute::seq<>, cute::seq<>, cute::seq<0, 1>, cute::seq<3>, cute::seq<4, 0, 1, 2>>,
      cutlass::epilogue::fusion::Sm90AccFetch, typename Cfg::AuxLoad, typename Cfg::AuxLoad,
      cutlass::epilogue::fusion::Sm90Compute<UpGrad, Bf16, float, kRound>, typename Cfg::AuxStore,
      cutlass::epilogue::fusion::Sm90Compute<GateGrad, Bf16, float, kRound>>;
  using Gemm = typename GemmOf<Cfg, cutlass::layout::RowMajor, Callbacks>::Gemm;

  static std::array<const void*, 4> pointers(const Params& p) { return {p.d_gate_up, p.dy, p.w_down, p.gate_up}; }
  static typename Gemm::Arguments arguments(int64_t T, int64_t H, int64_t F, int sm_count, const Params& p) {
    using namespace cute;
    using GemmKernel = typename Gemm::GemmKernel;
    const int M = static_cast<int>(T), N = static_cast<int>(F), K = static_cast<int>(H);
    const auto sa = cutlass::make_cute_packed_stride(typename GemmKernel::StrideA{}, make_shape(M, K, 1));
    const auto sb = cutlass::make_cute_packed_stride(typename GemmKernel::StrideB{}, make_shape(N, K, 1));
    const auto sd = rows_of<typename GemmKernel::StrideD>(2 * F, T);
    const auto s_aux = rows_of<typename Cfg::AuxStride>(2 * F, T);
    auto* gu = reinterpret_cast<const Bf16*>(p.gate_up);
    auto* dgu = reinterpret_cast<Bf16*>(p.d_gate_up);
    typename Callbacks::Arguments callbacks{{}, {gu, Bf16(0), s_aux}, {gu + F, Bf16(0), s_aux},
                                            {}, {dgu + F, s_aux},       {}};
    return {cutlass::gemm::GemmUniversalMode::kGemm,
            {M, N, K, 1},
            {reinterpret_cast<const Bf16*>(p.dy), sa, reinterpret_cast<const Bf16*>(p.w_down), sb},
            {callbacks, nullptr, sd, dgu, sd},
            cutlass::KernelHardwareInfo{0, sm_count}};
  }
};

inline void check(cutlass::Status s, const std::string& what) {
  SG_CHECK(s == cutlass::Status::kSuccess, what + ": " + cutlass::cutlassGetStatusString(s));
}

// Fusion (Backward<Cfg>) at shape (T, H, F); run() rebuilds CUTLASS's parameters (host only) when a pointer
// changes, so in a captured step it only launches.
template <class Fusion>
class Runner {
 public:
  using Params = typename Fusion::Params;
  Runner(int64_t T, int64_t H, int64_t F, int sm_count, std::string what)
      : T_(T), H_(H), F_(F), sm_count_(sm_count), what_(std::move(what)) {}

  void run(cudaStream_t stream, const Params& p) {
    const auto now = Fusion::pointers(p);
    for (const void* ptr : now) {
      SG_CHECK(ptr != nullptr, what_ + ": null pointer in params");
      SG_CHECK(reinterpret_cast<uintptr_t>(ptr) % 16 == 0, what_ + ": every pointer must be 16-byte aligned (TMA)");
    }
    if (!initialized_ || now != Fusion::pointers(bound_)) initialize(stream, p);
    check(gemm_.run(stream), what_ + ": launch");
    const cudaError_t launched = cudaGetLastError();
    if (launched != cudaSuccess) cuda::throw_cuda_error(launched, ("launch of " + what_).c_str(), __FILE__, __LINE__);
  }

 private:
  void initialize(cudaStream_t stream, const Params& p) {
    const auto args = Fusion::arguments(T_, H_, F_, sm_count_, p);
    check(gemm_.can_implement(args), what_ + ": CUTLASS refuses the problem");
    // The non-stream-K persistent scheduler and this epilogue need no workspace; a CUTLASS that did would
    // need one planned in the arena, so say so instead of passing a null pointer.
    SG_CHECK(Fusion::Gemm::get_workspace_size(args) == 0,
             what_ + ": CUTLASS asks for a workspace, which is not planned");
    check(gemm_.initialize(args, nullptr, stream), what_ + ": CUTLASS initialize");
    bound_ = p;
    initialized_ = true;
  }

  int64_t T_, H_, F_;
  int sm_count_;
  std::string what_;
  typename Fusion::Gemm gemm_;
  Params bound_{};  // the pointers gemm_ was initialized with
  bool initialized_ = false;
};

}  // namespace sg::kernels::detail::swiglu_gemm

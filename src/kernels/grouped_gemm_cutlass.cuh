#pragma once
// Internal to kernels/grouped_gemm: the CUTLASS 3.x Hopper ptr-array grouped GEMM, as one template that each
// grouped_gemm_<op>_sm90a.cu instantiates exactly once. Its setup launch (device counts -> problem shapes and
// pointers in the workspace) is op-agnostic and lives in grouped_gemm_setup.cu; Backend describes its arrays
// to it (setup_job) and launches only the GEMM (run_gemm). Include from
// those files only (they are built for sm_90a alone, with -DNDEBUG), and from the opt-in tuning target
// bench/grouped_gemm_variants, which instantiates Backend<Op, Config> with other KernelConfigs.
//
// The production configuration of each op is ProductionConfig<Op> below (switch one there); today:
// kernel KernelPtrArrayTmaWarpSpecializedCooperative (persistent, one CTA per SM, TMA loads with
// per-group descriptors rewritten on the device, wgmma, fp32 accumulators), cluster 2x1x1: two CTAs on
// adjacent M tiles of one expert share its B tile through TMA multicast, which halves the L2 traffic of B.
// The GroupScheduler rounds each expert's M tiles up to the cluster, so an odd M tile count costs one idle
// tile: for forward/backward_input (M = the expert's rows) with unbalanced routing, for backward_weight
// (M = N) never at the issue's shapes (N / 128 is even).
// Tiles: 128x256x64 for forward/backward_input (M = rows: many tiles at the MoE shapes, the largest tile
// has the least operand traffic); 128x192x64 for backward_weight, whose tile count is fixed by N x K per
// expert: at small_moe fc1 (8 experts, 1536 x 768) 128x128 tiles are 576 = 4.4 waves on 132 SMs, 128x192
// tiles 384 = 2.9 waves with a third less operand traffic per output. Measured with the opt-in tuning
// target bench/grouped_gemm_variants on the H200 (docs/performance.md, sixth session): 1.02-1.15x over
// 128x128 on every weight-gradient row of small_moe and a3b_proxy but a3b fc1 overwrite (0.99x); no
// variant beat 128x256 cooperative on forward/backward_input by more than 5%. Their epilogue subtile is 128x64
// instead of CUTLASS's 128x32: at K = 768 a tile has only 12 k-blocks, so its epilogue (register -> shared
// memory -> TMA store, one round per subtile) is a large share of it. Forward: 1.02-1.07x at a3b_proxy fc2,
// 1.02-1.03x at small_moe, 0.97-1.01x at a3b fc1 (K = 2048) in two device calls; backward_input 1.01-1.03x at
// every shape (ninth session). The same subtile was 0.84-1.02x for backward_weight. backward_weight has a second
// instantiation, 128x96 (NarrowWeightGradConfig), which the plan picks where 128x192 quantises badly
// (small_moe fc2: 192 tiles = 1.45 waves; 128x96 was 1.07x there, eighth session): grouped_gemm_tiles.h.
// Its cluster is 1x2, two CTAs on adjacent N tiles sharing A (the larger operand tile, 128 rows against 96):
// 1.03x the 2x1 cluster at small_moe fc2, 2x2 0.92x (sixteenth session).
// Problem shapes only in device memory (host_problem_shapes = nullptr): the grid is the SM count and
// the scheduler walks the groups' tiles on the device.
//
// Empty experts: an expert with m = 0 gets the problem shape (0, 0, 0), which the GroupScheduler gives
// zero tiles, so nothing of it is loaded or stored. This matters for backward_weight, where m is the
// reduction length: CUTLASS's mainloop with k_tile_count == 0 issues no MMA and leaves the accumulators
// unwritten (sm90_mma_array_tma_gmma_ss_warpspecialized.hpp, mma()), so a (N, K, 0) problem would store
// alpha * garbage + beta * C into dW. With (0, 0, 0) dW_g is left bit-for-bit unchanged; in overwrite mode
// the setup launch's extra blocks set it to zero (grouped_gemm_zero_fill.cuh) before the GEMM runs.
//
// backward_weight's two modes share the ONE instantiation: two Gemm objects initialized at plan time on
// their own CUTLASS workspaces, one with beta = 1 (accumulate into main_grad) and one with beta = 0
// (overwrite). beta is a literal of the epilogue arguments (no beta_ptr), and with beta == 0 the
// epilogue neither loads nor reads C at run time: Sm90TreeVisitor's beta * C + Z specialization
// (fusion/sm90_visitor_compute_tma_warpspecialized.hpp) returns is_C_load_needed() = !beta.is_zero() and
// clears the C registers; the array epilogue (collective/sm90_epilogue_array_tma_warpspecialized.hpp)
// issues the TMA load of C and its smem->register copy only when is_C_load_needed(). So overwrite moves
// no dW bytes in, and stale or NaN values in dW cannot leak into the result (0 * NaN never happens).
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/group_array_problem_shape.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/grouped_gemm_backend.h"
#include "kernels/grouped_gemm_setup.h"

#if !defined(CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED)
#error "the grouped GEMM needs CUDA >= 12.3 (TMA descriptors modified on the device)"
#endif

namespace sg::kernels::detail {

namespace grouped_cutlass {

using ElementAB = cutlass::bfloat16_t;
using ElementAccumulator = float;
using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;  // (M, N, K) per group
using GroupShape = ProblemShape::UnderlyingProblemShape;
// The setup launch (grouped_gemm_setup.cu) writes each problem shape as the three ints (M, N, K).
static_assert(sizeof(GroupShape) == 3 * sizeof(int), "a CUTLASS group problem shape is three ints");

enum class Schedule { kCooperative, kPingpong };

// A kernel configuration: CTA tile TileM x TileN x 64, cluster ClusterM x ClusterN x 1, and the kernel +
// epilogue schedule. Cooperative: both consumer warpgroups on one tile (TileM >= 128, 64 rows each), the
// epilogue after the mainloop. Pingpong: each consumer warpgroup on its own tile (TileM rows), so one
// warpgroup's epilogue overlaps the other's mainloop. EpiM x EpiN: the epilogue's subtile (the unit of its
// register -> shared memory -> TMA store pipeline); 0 x 0 lets CUTLASS choose (cooperative: 128 x 32).
template <int TileM, int TileN, int ClusterM, int ClusterN, Schedule S, int EpiM = 0, int EpiN = 0>
struct KernelConfig {
  static_assert(S == Schedule::kPingpong || TileM >= 128, "the cooperative schedule needs TileM >= 128");
  static_assert((EpiM == 0) == (EpiN == 0), "set both epilogue subtile sizes or neither");
  using TileShape = cute::Shape<cute::Int<TileM>, cute::Int<TileN>, cute::_64>;
  using ClusterShape = cute::Shape<cute::Int<ClusterM>, cute::Int<ClusterN>, cute::_1>;
  static constexpr bool kPingpong = S == Schedule::kPingpong;
  using KernelSchedule = std::conditional_t<kPingpong, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                                            cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>;
  using EpilogueSchedule = std::conditional_t<kPingpong, cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong,
                                              cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>;
  using EpilogueTile = std::conditional_t<EpiM == 0, cutlass::epilogue::collective::EpilogueTileAuto,
                                          cute::Shape<cute::Int<EpiM>, cute::Int<EpiN>>>;
  static std::string name() {
    std::string epilogue = EpiM == 0 ? std::string() : strprintf(", epilogue subtile %dx%d", EpiM, EpiN);
    return strprintf("warp-specialized %s, tile %dx%dx64, cluster %dx%dx1%s", kPingpong ? "pingpong" : "cooperative",
                     TileM, TileN, ClusterM, ClusterN, epilogue.c_str());
  }
};

// Today's configuration per op (see the file comment for why); production instantiates exactly these.
// forward, backward_input: a 128x64 epilogue subtile, half the store rounds per tile of CUTLASS's 128x32.
template <GroupedGemmOp Op>
struct ProductionConfig : KernelConfig<128, 256, 2, 1, Schedule::kCooperative, 128, 64> {};
template <>
struct ProductionConfig<GroupedGemmOp::kBackwardWeight> : KernelConfig<128, 192, 2, 1, Schedule::kCooperative> {};
// backward_weight's second tile (WeightGradTile::kNarrow, grouped_gemm_tiles.h): for shapes whose 128x192
// tiles leave most of a wave empty. Its cluster multicasts A (128 rows a tile) rather than B (96): 1.03x the
// 2x1 cluster at small_moe fc2 (docs/performance.md, sixteenth session).
struct NarrowWeightGradConfig : KernelConfig<128, 96, 1, 2, Schedule::kCooperative> {};

// Per-op layouts (CUTLASS tags: A is [M, K], B is [K, N] in the tag's sense, D is [M, N]) and output. DW:
// backward_weight's dW element (float, or cutlass::bfloat16_t into bf16 main gradients); the others ignore it.
template <GroupedGemmOp Op, class DW>
struct OpTraits;
template <class DW>
struct OpTraits<GroupedGemmOp::kForward, DW> {
  using LayoutA = cutlass::layout::RowMajor;     // x: K-major
  using LayoutB = cutlass::layout::ColumnMajor;  // W [N, K] row-major: K-major
  using ElementC = void;                         // no source: D = acc
  using ElementD = cutlass::bfloat16_t;
};
template <class DW>
struct OpTraits<GroupedGemmOp::kBackwardInput, DW> {
  using LayoutA = cutlass::layout::RowMajor;  // dy: K-major
  using LayoutB = cutlass::layout::RowMajor;  // W seen as B(k=n_out, n=k_in): N-major
  using ElementC = void;
  using ElementD = cutlass::bfloat16_t;
};
template <class DW>
struct OpTraits<GroupedGemmOp::kBackwardWeight, DW> {
  using LayoutA = cutlass::layout::ColumnMajor;  // dy^T: M-major
  using LayoutB = cutlass::layout::RowMajor;     // x seen as B(k=row, n=k_in): N-major
  using ElementC = DW;                           // C = D = dW, beta = 1 (the fp32 sum rounded once into bf16)
  using ElementD = DW;
};

template <GroupedGemmOp Op, class Config, class DW = float>
struct Kernel {
  using Traits = OpTraits<Op, DW>;
  using TileShape = typename Config::TileShape;
  using ClusterShape = typename Config::ClusterShape;
  using KernelSchedule = typename Config::KernelSchedule;
  using EpilogueSchedule = typename Config::EpilogueSchedule;
  using ElementC = typename Traits::ElementC;
  using ElementD = typename Traits::ElementD;
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlignAB = 128 / cutlass::sizeof_bits<ElementAB>::value;  // 16 bytes
  static constexpr int kAlignD = 128 / cutlass::sizeof_bits<ElementD>::value;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      typename Config::EpilogueTile, ElementAccumulator, ElementAccumulator, ElementC, LayoutD*,
      kAlignD, ElementD, LayoutD*, kAlignD, EpilogueSchedule,
      cutlass::epilogue::fusion::LinearCombination<ElementD, ElementAccumulator, ElementC,
                                                   ElementAccumulator>>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementAB, typename Traits::LayoutA*, kAlignAB, ElementAB,
      typename Traits::LayoutB*, kAlignAB, ElementAccumulator, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;

  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
  using StrideA = typename GemmKernel::InternalStrideA;
  using StrideB = typename GemmKernel::InternalStrideB;
  using StrideD = typename GemmKernel::InternalStrideD;
  using StoredElementD = typename GemmKernel::ElementD;  // the epilogue's D element (never void here)
};

inline size_t align_up(size_t bytes, size_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

template <GroupedGemmOp Op, class Config = ProductionConfig<Op>, class DW = float>
class Backend final : public GroupedGemmBackend {
  using K = Kernel<Op, Config, DW>;
  using Gemm = typename K::Gemm;
  using ElementD = typename K::StoredElementD;
  // Ops with a source C (backward_weight) have two modes: [0] beta = 0 (overwrite), [1] beta = 1
  // (accumulate); the others only beta = 0.
  static constexpr bool kHasSource = !std::is_void_v<typename K::ElementC>;
  static constexpr int kModes = kHasSource ? 2 : 1;

 public:
  Backend(const GroupedGemmDims& dims, int sm_count) : dims_(dims), sm_count_(sm_count) {
    const size_t groups = static_cast<size_t>(dims.num_groups);
    size_t at = 0;
    auto take = [&at](size_t bytes) {
      const size_t here = at;
      at = align_up(at + bytes, GroupedGemmPlan::kWorkspaceAlignment);
      return here;
    };
    shapes_at_ = take(groups * sizeof(GroupShape));
    ptr_a_at_ = take(groups * sizeof(void*));
    ptr_b_at_ = take(groups * sizeof(void*));
    ptr_d_at_ = take(groups * sizeof(void*));
    stride_a_at_ = take(groups * sizeof(typename K::StrideA));
    stride_b_at_ = take(groups * sizeof(typename K::StrideB));
    stride_d_at_ = take(groups * sizeof(typename K::StrideD));
    for (int mode = 0; mode < kModes; ++mode) {
      cutlass_at_[mode] = take(Gemm::get_workspace_size(arguments(nullptr, mode)));
    }
    total_bytes_ = at;
  }

  size_t workspace_bytes() const override { return total_bytes_; }
  std::string kernel_name() const override {
    return "cutlass sm90a ptr-array grouped gemm, " + Config::name() +
           (sizeof(ElementD) == 2 && kHasSource ? ", bf16 dW" : "");
  }

  void initialize(void* workspace) override {
    base_ = static_cast<unsigned char*>(workspace);
    // Every group has the same strides: leading dimensions are N or K (grouped_gemm_backend.h).
    const int64_t N = dims_.N, Kd = dims_.K;
    typename K::StrideA stride_a;
    typename K::StrideB stride_b;
    typename K::StrideD stride_d;
    // make_cute_packed_stride((M, K, 1)): only the leading dimension matters; the row count (1) does not.
    if constexpr (Op == GroupedGemmOp::kForward) {
      stride_a = cutlass::make_cute_packed_stride(typename K::StrideA{}, {1, int(Kd), 1});  // x [m, K]
      stride_b = cutlass::make_cute_packed_stride(typename K::StrideB{}, {int(N), int(Kd), 1});  // W [N, K]
      stride_d = cutlass::make_cute_packed_stride(typename K::StrideD{}, {1, int(N), 1});   // y [m, N]
    } else if constexpr (Op == GroupedGemmOp::kBackwardInput) {
      stride_a = cutlass::make_cute_packed_stride(typename K::StrideA{}, {1, int(N), 1});   // dy [m, N]
      stride_b = cutlass::make_cute_packed_stride(typename K::StrideB{}, {int(Kd), int(N), 1});  // B (K x N_out)
      stride_d = cutlass::make_cute_packed_stride(typename K::StrideD{}, {1, int(Kd), 1});  // dx [m, K]
    } else {
      stride_a = cutlass::make_cute_packed_stride(typename K::StrideA{}, {int(N), 1, 1});   // dy^T, ld N
      stride_b = cutlass::make_cute_packed_stride(typename K::StrideB{}, {int(Kd), 1, 1});  // x^T, ld K
      stride_d = cutlass::make_cute_packed_stride(typename K::StrideD{}, {int(N), int(Kd), 1});  // dW [N, K]
    }
    upload_repeated(stride_a, stride_a_at_);
    upload_repeated(stride_b, stride_b_at_);
    upload_repeated(stride_d, stride_d_at_);
    // The setup launch writes each shape as the ints (M, N, K) in that order: check CUTLASS reads them so.
    const GroupShape probe{7, 8, 9};
    int probe_ints[3];
    std::memcpy(probe_ints, &probe, sizeof probe_ints);
    if (probe_ints[0] != 7 || probe_ints[1] != 8 || probe_ints[2] != 9) {
      throw Error("grouped GEMM: CUTLASS's group problem shape is not laid out as the ints (M, N, K) that the "
                  "setup launch writes (grouped_gemm_setup.cu); this CUTLASS version is not supported");
    }

    for (int mode = 0; mode < kModes; ++mode) {
      const typename Gemm::Arguments args = arguments(base_, mode);
      const std::string what = std::string("grouped GEMM ") + grouped_gemm_op_name(Op) + " (" + kernel_name() +
                               (mode == 1 ? ", beta 1" : ", beta 0") + ")";
      cutlass::Status status = gemm_[mode].can_implement(args);
      if (status != cutlass::Status::kSuccess) {
        throw Error(what + ": CUTLASS can_implement refused the arguments: " + cutlassGetStatusString(status));
      }
      status = gemm_[mode].initialize(args, base_ + cutlass_at_[mode]);
      if (status != cutlass::Status::kSuccess) {
        throw Error(what + ": CUTLASS initialize failed: " + cutlassGetStatusString(status) +
                    " (shared memory opt-in or TMA descriptor creation; is this an sm_90 GPU?)");
      }
    }
    SG_CUDA_CHECK(cudaDeviceSynchronize());  // the stride uploads and any workspace initialisation
  }

  GroupedGemmSetupJob setup_job(const GroupedGemmOperands& o) const override {
    if (o.accumulate && !kHasSource) {
      throw Error(std::string("grouped GEMM ") + grouped_gemm_op_name(Op) + ": only backward_weight accumulates");
    }
    return {.op = Op,
            .num_groups = dims_.num_groups,
            .max_rows = dims_.max_total_rows,
            .N = dims_.N,
            .K = dims_.K,
            .counts = o.counts,
            .offsets = o.offsets,
            .a = o.a,
            .b = o.b,
            .d = o.d,
            .d_element_bytes = static_cast<int64_t>(sizeof(ElementD)),
            .shapes = at<int>(shapes_at_),
            .ptr_a = at<const void*>(ptr_a_at_),
            .ptr_b = at<const void*>(ptr_b_at_),
            .ptr_d = at<void*>(ptr_d_at_),
            .zero_fill_blocks = kHasSource && !o.accumulate ? zero_fill_blocks() : 0};
  }

  void run_gemm(cudaStream_t stream, bool accumulate) override {
    const cutlass::Status status = gemm_[accumulate ? 1 : 0].run(stream);
    if (status != cutlass::Status::kSuccess) {
      throw Error(std::string("grouped GEMM ") + grouped_gemm_op_name(Op) + ": CUTLASS run failed to launch: " +
                  cutlassGetStatusString(status));
    }
    SG_CUDA_CHECK_LAUNCH("CUTLASS grouped GEMM");
  }

 private:
  // Blocks that zero one empty expert's dW at full bandwidth, at most one per SM: they exit at once when
  // no expert is empty (the common case), and every block helps with each empty expert.
  int zero_fill_blocks() const {
    const int64_t vecs = dims_.N * dims_.K * static_cast<int64_t>(sizeof(ElementD)) / 16;  // 16-byte stores
    const int64_t per_block = int64_t{kGroupedGemmSetupThreads} * 4;                       // four a thread
    return static_cast<int>(std::min<int64_t>((vecs + per_block - 1) / per_block, sm_count_));
  }

  template <class T>
  T* at(size_t offset) const {
    return reinterpret_cast<T*>(base_ + offset);
  }

  template <class Stride>
  void upload_repeated(const Stride& stride, size_t offset) {
    const std::vector<Stride> host(static_cast<size_t>(dims_.num_groups), stride);
    SG_CUDA_CHECK(cudaMemcpy(base_ + offset, host.data(), host.size() * sizeof(Stride), cudaMemcpyHostToDevice));
  }

  // The arguments on the fixed workspace addresses (base == nullptr: only for the workspace size) for a
  // mode: 0 = beta 0, 1 = beta 1 (kHasSource only).
  typename Gemm::Arguments arguments(unsigned char* base, int mode) const {
    auto ptr = [base](size_t offset) -> void* { return base == nullptr ? nullptr : base + offset; };
    cutlass::KernelHardwareInfo hw_info;
    SG_CUDA_CHECK(cudaGetDevice(&hw_info.device_id));
    hw_info.sm_count = sm_count_;
    if (base != nullptr) {
      hw_info.max_active_clusters =
          cutlass::KernelHardwareInfo::query_device_max_active_clusters<typename K::GemmKernel>();
    }
    typename Gemm::Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    args.problem_shape = ProblemShape{dims_.num_groups, static_cast<GroupShape*>(ptr(shapes_at_)), nullptr};
    args.mainloop.ptr_A = static_cast<const ElementAB**>(ptr(ptr_a_at_));
    args.mainloop.dA = static_cast<typename K::StrideA*>(ptr(stride_a_at_));
    args.mainloop.ptr_B = static_cast<const ElementAB**>(ptr(ptr_b_at_));
    args.mainloop.dB = static_cast<typename K::StrideB*>(ptr(stride_b_at_));
    args.epilogue.thread.alpha = 1.0f;
    if constexpr (std::is_void_v<typename K::ElementC>) {
      args.epilogue.thread.beta = 0.0f;
      args.epilogue.ptr_C = nullptr;
      args.epilogue.dC = nullptr;
    } else {
      // C is D (accumulate into the main_grad): one pointer array, one stride array. With beta 0
      // the pointers stay set (the TMA descriptor of C is built from them) but C is never loaded.
      args.epilogue.thread.beta = mode == 1 ? 1.0f : 0.0f;
      args.epilogue.ptr_C = static_cast<const ElementD**>(ptr(ptr_d_at_));
      args.epilogue.dC = static_cast<typename K::StrideD*>(ptr(stride_d_at_));
    }
    args.epilogue.ptr_D = static_cast<ElementD**>(ptr(ptr_d_at_));
    args.epilogue.dD = static_cast<typename K::StrideD*>(ptr(stride_d_at_));
    args.hw_info = hw_info;
    return args;
  }

  GroupedGemmDims dims_;
  int sm_count_;
  size_t shapes_at_ = 0, ptr_a_at_ = 0, ptr_b_at_ = 0, ptr_d_at_ = 0;
  size_t stride_a_at_ = 0, stride_b_at_ = 0, stride_d_at_ = 0, cutlass_at_[kModes] = {};
  size_t total_bytes_ = 0;
  unsigned char* base_ = nullptr;
  Gemm gemm_[kModes];  // one per mode, each with its own CUTLASS workspace (per-SM TMA descriptors)
};

}  // namespace grouped_cutlass

}  // namespace sg::kernels::detail

// The MoE expert grouped GEMMs (kernels/grouped_gemm.h, CUTLASS sm_90a) against two cuBLASLt baselines
// at the issue's shapes, balanced routing (every expert gets rows / experts rows, counts and offsets in
// device memory as in the step):
//   small_moe  8 experts,   8192 tokens x top-2 = 16384 rows, hidden 768,  moe_ffn 768
//   a3b_proxy  128 experts, 4096 tokens x top-8 = 32768 rows, hidden 2048, moe_ffn 768
// dense:   ONE GEMM of the same total size (all rows, one [N, K] weight; kernels/gemm.h), issue 11's target.
//          For backward_weight that GEMM has the grouped op's FLOPs but 1/experts of its output, so a second
//          dense baseline has both: one GEMM writing experts x [N, K] fp32 from rows / experts rows ("dense,
//          same output": the dy buffer read as [rows / experts, experts N], x's first rows / experts rows).
// batched: ONE strided-batched GEMM over the SAME per-expert problems (experts x (rows / experts, N, K)),
//          writing exactly what the grouped op writes (for backward_weight: experts fp32 [N, K] outputs).
// For each expert linear (fc1: N = 2F, K = H; fc2: N = H, K = F) and op (forward, backward_input,
// backward_weight accumulating with beta 1, backward_weight_overwrite with beta 0: the grouped op with
// accumulate = false, the baselines with beta 0) it prints the time per launch, the grouped TFLOP/s and the
// ratio grouped TFLOP/s / baseline TFLOP/s (target >= 0.75). Inputs rotate through 3 copies so they are not
// all L2-resident. --timing graph (default) times each candidate as the training step runs it, inside a
// CUDA graph: a graph of 20 launches per candidate, the three graphs replayed in turns so that they share
// the clock and power state, per-launch time = median replay / 20 (bench::graph_replay_ms). --timing events
// is the earlier method: stream launches queued back to back, an event pair around each, the median, one
// candidate after the other.
// The grouped time includes its setup kernel (whose extra blocks, when overwriting, zero the empty experts' dW).
// A last table times the GEMM alone (run_prepared on arrays set up beforehand), which is what each of the MoE
// layer's grouped GEMMs costs beside the one setup launch it shares with the layer's other grouped GEMMs.
// backward_weight: the grouped and batched ops read and write one fp32 [N, K] dW PER EXPERT (beta 1), the
// dense one a single [N, K]: with few rows per expert (a3b_proxy) that traffic bounds them; overwriting
// (beta 0) halves it (no read). The "bound" column makes that a number: the most the ratio to dense can be when
// the grouped op moves at least its unique DRAM traffic (inputs once, outputs once, dW read too when
// accumulating) at the copy bandwidth measured in the same run (a device-to-device cudaMemcpyAsync, read and
// write counted): dense ms / (traffic / bandwidth). Rows whose bound is below the target cannot reach it.
// --case dense instead times the dense recipes' linears (small and 1b: qkv, o, fc1, fc2 over 8192 tokens) as
// one-expert problems: the grouped kernel as a plain CUTLASS GEMM against cuBLASLt (issue 11's targets are
// not counted there; "batched" is then one GEMM too).
// Usage: build/bench/grouped_gemm_bench [--iters N] [--warmup N] [--case small_moe|a3b_proxy|all|dense]
//                                      [--timing graph|events]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "kernels/gemm.h"
#include "kernels/grouped_gemm.h"
#include "grouped_gemm_bench_util.cuh"
#include "strided_batched_gemm.h"

namespace {

using namespace sg;

constexpr double kTarget = 0.75;  // issue 11: grouped TFLOP/s >= 75% of the baseline's
constexpr int kGraphLaunches = 20;  // --timing graph: launches of one candidate per captured graph

using bench::Buffer;
using bench::fill;
using bench::median_ms;
using bench::MoeShape;

struct Row {
  std::string model, layer, op, tile;  // tile: backward_weight's, chosen per shape (kernels/grouped_gemm_tiles.h)
  int64_t n, k;
  double grouped_ms;      // the op as run(): its setup launch + the GEMM
  double gemm_alone_ms;   // the GEMM alone, on arrays set up beforehand (run_prepared)
  double dense_ms, batched_ms, flop;
  double same_output_ms;  // backward_weight: the dense GEMM with the grouped op's FLOPs and output; else < 0
  double traffic_bytes;  // the least the grouped op moves through DRAM
  // The highest grouped/dense ratio that traffic allows at `bytes_per_ms` (the measured copy bandwidth).
  double traffic_bound(double bytes_per_ms) const { return dense_ms / (traffic_bytes / bytes_per_ms); }
};

// One op's grouped candidates: as run() (its setup launch, then the GEMM) and the GEMM alone (run_prepared on
// arrays set up beforehand, as the MoE layer's one GroupedGemmSetup launch leaves them for its two or four GEMMs).
struct GroupedCandidates {
  std::function<void()> prepare;               // sets up every input copy's plan; call before timing gemm_alone
  std::function<void(int)> with_setup, gemm_alone;  // launch i (input copy i % kInputCopies)
};

// kInputCopies plans of one op, each on its own workspace: a plan holds the arrays of ONE set of operands, and
// the GEMM alone rotates over the input copies like every other candidate.
template <class Plan>
class GroupedPlans {
 public:
  explicit GroupedPlans(const kernels::GroupedGemmDims& dims) {
    for (int c = 0; c < bench::kInputCopies; ++c) plans_.push_back(std::make_unique<Plan>(dims));
    const size_t stride = (plans_[0]->workspace_bytes() + 255) / 256 * 256;
    workspace_ = std::make_unique<Buffer<unsigned char>>(stride * bench::kInputCopies);
    for (int c = 0; c < bench::kInputCopies; ++c) {
      plans_[c]->bind(workspace_->p + c * stride, plans_[c]->workspace_bytes());
      plans_[c]->initialize();
    }
  }
  // params(i): the op's params for input copy i % kInputCopies.
  template <class ParamsOf>
  GroupedCandidates candidates(cudaStream_t stream, ParamsOf params) const {
    auto plan = [this](int i) -> const Plan& { return *plans_[i % bench::kInputCopies]; };
    return {.prepare =
                [=] {
                  for (int c = 0; c < bench::kInputCopies; ++c) {
                    kernels::GroupedGemmSetup().add(plan(c), params(c)).launch(stream);
                  }
                },
            .with_setup = [=](int i) { plan(i).run(stream, params(i)); },
            .gemm_alone = [=](int i) { plan(i).run_prepared(stream, params(i)); }};
  }

 private:
  std::vector<std::unique_ptr<Plan>> plans_;
  std::unique_ptr<Buffer<unsigned char>> workspace_;
};

// Device-to-device copy bandwidth in bytes per ms (read and write both counted): median of copies of 1 GiB.
double copy_bandwidth_bytes_per_ms(int warmup, int iters) {
  constexpr size_t kBytes = size_t{1} << 30;
  const Buffer<unsigned char> from(kBytes), to(kBytes);
  SG_CUDA_CHECK(cudaMemset(from.p, 1, kBytes));
  SG_CUDA_CHECK(cudaDeviceSynchronize());
  cuda::Stream stream;
  const double ms = median_ms(stream, warmup, iters, [&](int) {
    SG_CUDA_CHECK(cudaMemcpyAsync(to.p, from.p, kBytes, cudaMemcpyDeviceToDevice, stream));
  });
  return 2.0 * double(kBytes) / ms;
}

// The column-major cuBLASLt problems of the row-major expert linears over T rows (kernels/gemm.h's
// mapping, the descriptions kernels::Linear* plan in gemm.cpp): the dense baseline over all rows, the
// batched one per expert.
kernels::GemmDesc forward_desc(int64_t T, int64_t K, int64_t N) {  // y^T[N,T] = W x^T: A = W, B = x, D = y
  return {.transpose_a = true, .m = N, .n = T, .k = K, .lda = K, .ldb = K, .ldd = N};
}
kernels::GemmDesc backward_input_desc(int64_t T, int64_t K, int64_t N) {  // dx^T[K,T] = W^T dy^T: A = W, B = dy
  return {.m = K, .n = T, .k = N, .lda = K, .ldb = N, .ldd = K};
}
kernels::GemmDesc backward_weight_desc(int64_t T, int64_t K, int64_t N, float beta) {  // dW^T += x^T dy: A = x, B = dy
  return {.transpose_b = true, .m = K, .n = N, .k = T, .lda = K, .ldb = N, .ldd = K,
          .d_type = kernels::GemmDtype::kFP32, .beta = beta};
}
// The dense GEMM of backward_weight's FLOPs AND output: E fp32 [N, K] blocks side by side from M = T / E rows,
// D^T[K, E N] (+)= x^T[K, M] dy'[M, E N], dy' being the [T, N] dy buffer read as [M, E N] (same bytes).
kernels::GemmDesc backward_weight_same_output_desc(int64_t M, int64_t E, int64_t K, int64_t N, float beta) {
  return {.transpose_b = true, .m = K, .n = E * N, .k = M, .lda = K, .ldb = E * N, .ldd = K,
          .d_type = kernels::GemmDtype::kFP32, .beta = beta};
}

// cuBLASLt operands of one launch (input copy i).
struct Operands {
  const void* a;
  const void* b;
  void* d;
};

// Times the ops of one expert linear (N out, K in): grouped, dense, strided-batched.
void bench_linear(const MoeShape& s, const char* layer, int64_t N, int64_t K, bench::Timing timing, int warmup,
                  int iters, std::vector<Row>& rows) {
  const bench::ExpertLinearBuffers b(s, N, K);
  const int64_t T = b.T, E = b.E, M = b.M;  // M: rows per expert (balanced)
  const auto &x = b.x, &dy = b.dy, &w = b.w;
  const auto& dw = b.dw;
  const auto &y = b.y, &dx = b.dx;
  const auto &counts = b.counts, &offsets = b.offsets;
  cuda::Stream stream;
  const kernels::GroupedGemmDims dims = b.dims();
  kernels::Blas blas;
  auto c = [](int i) { return i % bench::kInputCopies; };
  // Each op's params for input copy c(i).
  auto fwd_params = [&](int i) {
    return kernels::GroupedLinearForwardParams{
        .y = y.p, .x = x[c(i)]->p, .w = w[c(i)]->p, .counts = counts.p, .offsets = offsets.p};
  };
  auto dgrad_params = [&](int i) {
    return kernels::GroupedLinearBackwardInputParams{
        .dx = dx.p, .dy = dy[c(i)]->p, .w = w[c(i)]->p, .counts = counts.p, .offsets = offsets.p};
  };
  auto wgrad_params = [&](bool accumulate) {
    return [&, accumulate](int i) {
      return kernels::GroupedLinearBackwardWeightParams{.dw = dw[c(i)]->p, .dy = dy[c(i)]->p, .x = x[c(i)]->p,
                                                        .counts = counts.p, .offsets = offsets.p,
                                                        .accumulate = accumulate};
    };
  };
  GroupedPlans<kernels::GroupedLinearForward> g_fwd(dims);
  GroupedPlans<kernels::GroupedLinearBackwardInput> g_dgrad(dims);
  GroupedPlans<kernels::GroupedLinearBackwardWeight> g_wgrad(dims);

  auto wgrad_operands = [&](int i) { return Operands{x[c(i)]->p, dy[c(i)]->p, dw[c(i)]->p}; };
  struct OpCase {
    const char* op;
    GroupedCandidates grouped;
    kernels::GemmDesc dense, expert;  // over all T rows; one expert's M rows
    bench::StridedBatch batch;        // strides between the experts' A, B, D
    std::function<Operands(int)> operands;
    std::optional<kernels::GemmDesc> same_output;  // backward_weight with E > 1: dense, same FLOPs and output
  };
  auto same_output = [&](float beta) {
    return E > 1 ? std::optional(backward_weight_same_output_desc(M, E, K, N, beta)) : std::nullopt;
  };
  const bench::StridedBatch wgrad_batch{.count = int(E), .stride_a = M * K, .stride_b = M * N, .stride_d = N * K};
  const OpCase ops[] = {
      {"forward", g_fwd.candidates(stream, fwd_params), forward_desc(T, K, N), forward_desc(M, K, N),
       {.count = int(E), .stride_a = N * K, .stride_b = M * K, .stride_d = M * N},
       [&](int i) { return Operands{w[c(i)]->p, x[c(i)]->p, y.p}; }},
      {"backward_input", g_dgrad.candidates(stream, dgrad_params), backward_input_desc(T, K, N),
       backward_input_desc(M, K, N), {.count = int(E), .stride_a = N * K, .stride_b = M * N, .stride_d = M * K},
       [&](int i) { return Operands{w[c(i)]->p, dy[c(i)]->p, dx.p}; }},
      {"backward_weight", g_wgrad.candidates(stream, wgrad_params(true)), backward_weight_desc(T, K, N, 1.0f),
       backward_weight_desc(M, K, N, 1.0f), wgrad_batch, wgrad_operands, same_output(1.0f)},
      {"backward_weight_overwrite", g_wgrad.candidates(stream, wgrad_params(false)),
       backward_weight_desc(T, K, N, 0.0f), backward_weight_desc(M, K, N, 0.0f), wgrad_batch, wgrad_operands,
       same_output(0.0f)},
  };
  const double flop = 2.0 * double(T) * double(N) * double(K);
  // DRAM bytes: bf16 activations over all T rows, E bf16 weights, E fp32 dW.
  const double x_bytes = 2.0 * double(T) * double(K), y_bytes = 2.0 * double(T) * double(N);
  const double w_bytes = 2.0 * double(E) * double(N) * double(K), dw_bytes = 2.0 * w_bytes;
  auto traffic = [&](const std::string& op) {
    if (op == "backward_weight") return x_bytes + y_bytes + 2.0 * dw_bytes;  // dW read and written
    if (op == "backward_weight_overwrite") return x_bytes + y_bytes + dw_bytes;
    return x_bytes + w_bytes + y_bytes;  // forward and backward_input: one activation in, one out
  };
  for (const OpCase& o : ops) {
    const kernels::GemmPlan& dense = blas.plan(o.dense);
    o.grouped.prepare();  // the GEMM-alone candidate's arrays, set up once per input copy
    std::vector<std::function<void(int)>> candidates{o.grouped.with_setup, o.grouped.gemm_alone, [&](int i) {
                                                       const Operands p = o.operands(i);
                                                       dense.run(stream, p.a, p.b, p.d);
                                                     }};
    std::unique_ptr<bench::StridedBatchedGemm> batched;  // none (n/a) when cuBLASLt has no algorithm for the batch
    try {
      batched = std::make_unique<bench::StridedBatchedGemm>(blas, o.expert, o.batch);
      candidates.push_back([&](int i) {
        const Operands p = o.operands(i);
        batched->run(stream, p.a, p.b, p.d);
      });
    } catch (const Error& e) {
      std::fprintf(stderr, "%s %s %s: no batched baseline: %s\n", s.name, layer, o.op, e.what());
    }
    const size_t same_output_at = candidates.size();
    if (o.same_output) {
      const kernels::GemmPlan* same = &blas.plan(*o.same_output);
      candidates.push_back([&, same](int i) {
        const Operands p = o.operands(i);
        same->run(stream, p.a, p.b, p.d);
      });
    }
    std::vector<double> ms;
    if (timing == bench::Timing::kGraph) {
      ms = bench::graph_replay_ms(stream, kGraphLaunches, warmup, iters, candidates);
    } else {
      for (const auto& candidate : candidates) ms.push_back(median_ms(stream, warmup, iters, candidate));
    }
    const double grouped_ms = ms[0], gemm_alone_ms = ms[1], dense_ms = ms[2];
    const double batched_ms = batched ? ms[3] : -1.0;
    const double same_output_ms = o.same_output ? ms[same_output_at] : -1.0;
    const std::string tile =
        kernels::weight_grad_tile_name(kernels::choose_weight_grad_tile(dims, cuda::device_properties().sm_count));
    rows.push_back({s.name, layer, o.op, tile, N, K, grouped_ms, gemm_alone_ms, dense_ms, batched_ms, flop,
                    same_output_ms, traffic(o.op)});
  }
}

constexpr const char* kAbout =
    "Times the MoE expert grouped GEMMs (kernels/grouped_gemm.h, CUTLASS) against cuBLASLt baselines of the same\n"
    "size (one dense GEMM; one strided-batched GEMM over the same per-expert problems) at the MoE shapes\n"
    "small_moe and a3b_proxy, for each expert linear (fc1, fc2) and op (forward, backward_input,\n"
    "backward_weight accumulating and overwriting): time per launch, grouped TFLOP/s and its ratio to each\n"
    "baseline (target >= 0.75), and the bound DRAM traffic puts on that ratio. --case dense times the dense\n"
    "recipes' linears as one-expert problems instead. Prints tables; writes nothing. Needs a CUDA GPU (sm_90).";

int run(int argc, char** argv) {
  const bench::GroupedBenchArgs args =
      bench::parse_grouped_bench_args(argc, argv, "grouped_gemm_bench", {}, 1, /*allow_dense=*/true,
                                      /*allow_timing=*/true, kAbout);
  const int warmup = args.warmup, iters = args.iters;
  cuda::require_device("grouped_gemm_bench");
  std::printf("GPU: %s\n", cuda::device_properties().summary().c_str());
  std::vector<Row> rows;
  if (args.dense()) {
    for (const bench::DenseProbe& d : bench::kDenseProbes) {
      bench_linear(d.shape, d.layer, d.n_out, d.k_in, args.timing, warmup, iters, rows);
    }
  } else {
    for (const MoeShape& s : bench::kMoeShapes) {
      if (!args.selects(s)) continue;
      bench_linear(s, "fc1", 2 * s.ffn, s.hidden, args.timing, warmup, iters, rows);
      bench_linear(s, "fc2", s.hidden, s.ffn, args.timing, warmup, iters, rows);
    }
  }
  const double bandwidth = copy_bandwidth_bytes_per_ms(warmup, iters);
  const kernels::GroupedGemmDims probe{.num_groups = 1, .max_total_rows = 8, .N = 8, .K = 8};
  kernels::GroupedGemmDims wide_probe = probe;
  wide_probe.weight_grad_tile = kernels::WeightGradTile::kWide;
  std::printf("grouped (+ a setup kernel each, which zeroes the empty experts' dW when overwriting):\n"
              "  forward          %s\n  backward_input   %s\n  backward_weight  %s\n"
              "                   (tile 128x96 where the plan picks it per shape: the tile column)\n"
              "dense: cuBLASLt, one GEMM over all rows with one [N, K] weight\n"
              "batched: cuBLASLt, one strided-batched GEMM over the experts' problems (rows / experts each)\n",
              kernels::GroupedLinearForward(probe).kernel_name().c_str(),
              kernels::GroupedLinearBackwardInput(probe).kernel_name().c_str(),
              kernels::GroupedLinearBackwardWeight(wide_probe).kernel_name().c_str());
  if (args.timing == bench::Timing::kGraph) {
    std::printf("timing graph: per launch, the median over %d replays of a CUDA graph of %d launches / %d (as the\n"
                "step runs them); the grouped, dense and batched graphs replayed in turns after %d warmup rounds;\n",
                iters, kGraphLaunches, kGraphLaunches, warmup);
  } else {
    std::printf("timing events: median of %d stream launches after %d warmup, an event pair around each;\n", iters,
                warmup);
  }
  std::printf("inputs rotated over %d copies, balanced routing;\n"
              "ratio = grouped TFLOP/s / baseline TFLOP/s, * below the %.2f target; bound = the highest ratio to\n"
              "dense that the op's DRAM traffic allows at the copy bandwidth measured here, %.2f TB/s (! below the "
              "target)\n\n",
              bench::kInputCopies, kTarget, bandwidth * 1e3 / 1e12);
  std::printf("%-10s %-5s %-25s %5s %5s %10s %8s %10s %6s %6s %10s %6s %s\n", "model", "layer", "op", "N", "K",
              "grouped ms", "TFLOP/s", "dense ms", "ratio", "bound", "batched ms", "ratio", "tile");
  int pass_dense = 0, pass_batched = 0, reachable = 0, pass_reachable = 0;
  for (const Row& r : rows) {
    const double dense_ratio = r.dense_ms / r.grouped_ms, batched_ratio = r.batched_ms / r.grouped_ms;
    const double bound = r.traffic_bound(bandwidth);
    pass_dense += dense_ratio >= kTarget;
    pass_batched += batched_ratio >= kTarget;
    reachable += bound >= kTarget;
    pass_reachable += bound >= kTarget && dense_ratio >= kTarget;
    std::printf("%-10s %-5s %-25s %5lld %5lld %10.4f %8.1f %10.4f %5.2f%s %5.2f%s", r.model.c_str(),
                r.layer.c_str(), r.op.c_str(), static_cast<long long>(r.n), static_cast<long long>(r.k),
                r.grouped_ms, r.flop / (r.grouped_ms * 1e-3) / 1e12, r.dense_ms, dense_ratio,
                dense_ratio >= kTarget ? " " : "*", bound, bound >= kTarget ? " " : "!");
    if (r.batched_ms > 0.0) {
      std::printf(" %10.4f %5.2f%s", r.batched_ms, batched_ratio, batched_ratio >= kTarget ? " " : "*");
    } else {
      std::printf(" %10s %6s", "n/a", "n/a");
    }
    std::printf(" %s\n", r.op.rfind("backward_weight", 0) == 0 ? r.tile.c_str() : "");
  }
  if (args.dense()) return 0;  // issue 11's targets are about the MoE shapes
  std::printf("\nbackward_weight against one dense GEMM of the same FLOPs and the same output (experts x fp32 [N, K]\n"
              "from rows / experts rows), where the dense baseline above writes one [N, K]:\n");
  std::printf("%-10s %-5s %-25s %10s %14s %6s\n", "model", "layer", "op", "grouped ms", "same-out ms", "ratio");
  int pass_same_output = 0;  // every row against the dense GEMM of its FLOPs and output
  for (const Row& r : rows) {
    if (r.same_output_ms <= 0.0) {
      pass_same_output += r.dense_ms / r.grouped_ms >= kTarget;
      continue;
    }
    const double ratio = r.same_output_ms / r.grouped_ms;
    pass_same_output += ratio >= kTarget;
    std::printf("%-10s %-5s %-25s %10.4f %14.4f %5.2f%s\n", r.model.c_str(), r.layer.c_str(), r.op.c_str(),
                r.grouped_ms, r.same_output_ms, ratio, ratio >= kTarget ? " " : "*");
  }
  std::printf("\nthe GEMM alone (run_prepared, its arrays set up beforehand: the MoE layer sets up its forward's two\n"
              "and its backward's four grouped GEMMs in ONE launch), against dense and, for backward_weight, the\n"
              "dense GEMM of the same FLOPs and output:\n");
  std::printf("%-10s %-5s %-25s %10s %14s %8s %6s %9s\n", "model", "layer", "op", "alone ms", "with setup ms",
              "TFLOP/s", "dense", "same-out");
  int pass_alone_dense = 0, pass_alone_same_output = 0;
  for (const Row& r : rows) {
    const double dense_ratio = r.dense_ms / r.gemm_alone_ms;
    const double same_output_ratio = r.same_output_ms > 0.0 ? r.same_output_ms / r.gemm_alone_ms : dense_ratio;
    pass_alone_dense += dense_ratio >= kTarget;
    pass_alone_same_output += same_output_ratio >= kTarget;
    std::printf("%-10s %-5s %-25s %10.4f %14.4f %8.1f %5.2f%s", r.model.c_str(), r.layer.c_str(), r.op.c_str(),
                r.gemm_alone_ms, r.grouped_ms, r.flop / (r.gemm_alone_ms * 1e-3) / 1e12, dense_ratio,
                dense_ratio >= kTarget ? " " : "*");
    if (r.same_output_ms > 0.0) {
      std::printf(" %8.2f%s\n", same_output_ratio, same_output_ratio >= kTarget ? " " : "*");
    } else {
      std::printf(" %9s\n", "-");
    }
  }
  std::printf("\ntarget grouped/dense   >= %.2f: %d of %zu rows; %d of the %d rows whose traffic bound allows it\n",
              kTarget, pass_dense, rows.size(), pass_reachable, reachable);
  std::printf("target grouped/dense of the same FLOPs and output >= %.2f: %d of %zu rows\n", kTarget,
              pass_same_output, rows.size());
  std::printf("target grouped/batched >= %.2f: %d of %zu rows\n", kTarget, pass_batched, rows.size());
  std::printf("target GEMM alone/dense >= %.2f: %d of %zu rows\n", kTarget, pass_alone_dense, rows.size());
  std::printf("target GEMM alone/dense, backward_weight of the same FLOPs and output, >= %.2f: %d of %zu rows\n",
              kTarget, pass_alone_same_output, rows.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const sg::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

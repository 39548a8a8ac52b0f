// cuBLASLt's GEMM candidates timed under the power cap (issue 13). The llama/1b step draws the H200's 700 W
// limit in every sample and its clock drops to 1500-1600 MHz, so there a GEMM's speed follows the energy it
// spends, while cuBLASLt's heuristic ranks its candidates for speed at full clock. This bench asks whether another
// of its candidates than the first spends less: each dense GEMM of a recipe's step (forward, input
// gradient and weight gradient of the QKV, output, MLP and LM-head linears), planned at heuristic ranks 0..N-1,
// each rank launched back to back for --seconds (inputs rotating through copies that do not fit in L2), so the
// board sits at its limit as in the step. Reported per rank: ms per GEMM (events around the whole loop, mean
// of --rounds rounds that alternate the ranks' order against drift), TFLOP/s, the ratio to rank 0 in the same
// rounds (> 1: faster than the heuristic's first choice) and its range over the rounds, the board power and SM
// clock while it ran (NVML), and which candidate the step runs (kernels/gemm_preferences.h).
// --explore goes past the heuristic's list: every tile cuBLASLt's first choice can run with (its
// CUBLASLT_ALGO_CAP_TILE_IDS) on 1x1, 2x1 and 1x2 clusters (--clusters: others), each that cuBLASLt accepts timed
// once briefly at the cap;
// the --ranks fastest of those, the first choice and the step's then run the rounds.
// Each candidate's GEMMs are launched from CUDA graphs of up to 100 launches, as the step's graph runs them: at tiny's
// shapes a GEMM runs for a few microseconds, less than cuBLASLt takes to launch one from the host, so timing host
// launches would time the host. --host-launches launches them from the host, one by one (the seventeenth and
// eighteenth sessions' runs, at 1b and small, where a GEMM runs for hundreds of microseconds).
// --ops narrows the GEMMs to some of the three ops, --linears to some of the linears; --grad-dtype bf16 times the
// weight gradients writing bf16, as the step does with bf16 main gradients (ddp.grad_reduce_in_fp32=false);
// --lm-head-rows sets the LM head's chunk (8192 at 1b and small: one chunk, STEPGRAPH_LM_HEAD_CHUNK_MIB=1024);
// --rows sets every GEMM's rows (1 to 8: the matrix-vector products of `stepgraph generate`'s decoding step).
// Usage: build/bench/gemm_power_bench [--recipe 1b|small|tiny|all] [--ranks N] [--seconds S] [--rounds R] [--explore]
//                                     [--clusters ID,ID,...] [--host-launches] [--ops OP,OP,...] [--grad-dtype fp32|bf16]
//                                     [--linears NAME,...] [--lm-head-rows N] [--rows N]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/power_sampler.h"
#include "bench_args.h"
#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "graph/capture.h"
#include "graph/graph_exec.h"
#include "grouped_gemm_bench_util.cuh"
#include "kernels/gemm.h"

namespace {

using namespace sg;
using bench::Buffer;

enum class Op { forward, backward_input, backward_weight };
const char* op_name(Op op) {
  return op == Op::forward ? "forward" : op == Op::backward_input ? "backward_input" : "backward_weight";
}

struct Linear {
  const char* name;
  int64_t T, K, N;  // tokens, in and out features
};
struct Recipe {
  const char* name;
  std::vector<Linear> linears;
};

// The step's dense linears (bench recipes: tokens = micro batch x sequence; the LM head runs in chunks of 4096
// rows, kernels/lm_head.h).
std::vector<Recipe> recipes() {
  return {{"1b", {{"qkv", 8192, 2048, 6144}, {"o", 8192, 2048, 2048}, {"fc1", 8192, 2048, 11264},
                  {"fc2", 8192, 5632, 2048}, {"lm_head", 4096, 2048, 32768}}},
          {"small", {{"qkv", 8192, 768, 2304}, {"o", 8192, 768, 768}, {"fc1", 8192, 768, 4096},
                     {"fc2", 8192, 2048, 768}, {"lm_head", 4096, 768, 32768}}},
          {"tiny", {{"qkv", 1024, 256, 768}, {"o", 1024, 256, 256}, {"fc1", 1024, 256, 1408},
                    {"fc2", 1024, 704, 256}, {"lm_head", 1024, 256, 8192}}}};
}

kernels::GemmDesc desc_of(const Linear& l, Op op, int rank, kernels::FloatDtype grad_dtype) {
  kernels::GemmDesc d = op == Op::forward          ? kernels::linear_forward_desc(l.T, l.K, l.N)
                        : op == Op::backward_input ? kernels::linear_backward_input_desc(l.T, l.K, l.N)
                                                   : kernels::linear_backward_weight_desc(l.T, l.K, l.N, grad_dtype);
  d.heuristic_rank = rank;
  return d;
}

// Elements of a column-major operand as the descriptor stores it.
int64_t a_elems(const kernels::GemmDesc& d) { return d.lda * (d.transpose_a ? d.m : d.k); }
int64_t b_elems(const kernels::GemmDesc& d) { return d.ldb * (d.transpose_b ? d.k : d.n); }
int64_t d_elems(const kernels::GemmDesc& d) { return d.ldd * d.n; }

// Rotating operand copies of one GEMM: enough that a pass over them does not stay in the 50 MB L2.
struct Operands {
  explicit Operands(const kernels::GemmDesc& d) {
    const int64_t bytes = (a_elems(d) + b_elems(d)) * 2 + d_elems(d) * (d.d_type == kernels::GemmDtype::kFP32 ? 4 : 2);
    copies = static_cast<int>(std::clamp<int64_t>((int64_t{256} << 20) / std::max<int64_t>(bytes, 1) + 1, 2, 8));
    for (int c = 0; c < copies; ++c) {
      a.push_back(std::make_unique<Buffer<bf16>>(a_elems(d)));
      b.push_back(std::make_unique<Buffer<bf16>>(b_elems(d)));
      bench::fill(*a.back(), 100 + c, 1.0f);
      bench::fill(*b.back(), 200 + c, 0.05f);
      if (d.d_type == kernels::GemmDtype::kFP32) {
        d32.push_back(std::make_unique<Buffer<float>>(d_elems(d)));
      } else {
        d16.push_back(std::make_unique<Buffer<bf16>>(d_elems(d)));
      }
    }
    SG_CUDA_CHECK(cudaDeviceSynchronize());
  }
  void* out(int c) const { return d32.empty() ? static_cast<void*>(d16[c]->p) : static_cast<void*>(d32[c]->p); }
  int copies = 0;
  std::vector<std::unique_ptr<Buffer<bf16>>> a, b, d16;
  std::vector<std::unique_ptr<Buffer<float>>> d32;
};

struct Timing {
  double ms = 0.0;  // per GEMM
  bench::PowerSummary power;
};

constexpr int64_t kGraphLaunches = 100;  // GEMM launches per captured graph

// `launches` GEMMs back to back (the weight gradient overwriting, as the step's first microbatch does), timed
// by events around the whole loop, with the power sampled meanwhile. With `graphs`, the launches come from replays
// of a graph of up to kGraphLaunches of them (so the count rounds up to a multiple of it); else from the host.
Timing sustained(const kernels::GemmPlan& plan, const Operands& ops, Op op, int64_t launches, bool graphs,
                 cuda::Stream& stream, bench::PowerSampler& sampler) {
  const auto launch = [&](int64_t i) {
    const int c = static_cast<int>(i % ops.copies);
    if (op == Op::backward_weight) {
      plan.run_overwriting(stream, ops.a[c]->p, ops.b[c]->p, ops.out(c));
    } else {
      plan.run(stream, ops.a[c]->p, ops.b[c]->p, ops.out(c));
    }
  };
  std::unique_ptr<graph::GraphExec> exec;
  int64_t per_replay = 1;
  if (graphs) {
    per_replay = std::min(launches, kGraphLaunches);
    const graph::CapturedGraph captured = graph::capture_graph(stream, "gemm_power_bench candidate", [&](cudaStream_t) {
      for (int64_t i = 0; i < per_replay; ++i) launch(i);
    });
    exec = std::make_unique<graph::GraphExec>("gemm_power_bench candidate");
    exec->install(captured.graph, stream, captured.capture_ms);
  }
  const int64_t replays = graphs ? (launches + per_replay - 1) / per_replay : 0;
  cuda::Event start(true), stop(true);
  sampler.start();
  start.record(stream);
  if (graphs) {
    for (int64_t r = 0; r < replays; ++r) exec->launch(stream);
  } else {
    for (int64_t i = 0; i < launches; ++i) launch(i);
  }
  stop.record(stream);
  stream.synchronize();
  Timing t;
  t.power = sampler.stop();
  t.ms = cuda::Event::elapsed_ms(start, stop) / static_cast<double>(graphs ? replays * per_replay : launches);
  return t;
}

struct Args {
  std::string recipe;
  int ranks = 0;
  double seconds = 0.0;
  int rounds = 0;
  bool explore = false;
  bool graphs = true;              // --host-launches: false
  std::vector<int64_t> clusters;   // --explore's cluster shapes as CUBLASLT_CLUSTER_SHAPE_* values
  std::vector<Op> ops;             // --ops
  kernels::FloatDtype grad_dtype = kernels::FloatDtype::fp32;  // --grad-dtype
  std::vector<std::string> linears;  // --linears (empty: all)
  int64_t lm_head_rows = 0;          // --lm-head-rows (0: the recipe's, the default chunk)
  int64_t rows = 0;                  // --rows (0: the recipe's tokens)
};

const bench::ToolSpec& tool_spec() {
  using bench::ToolValue;
  static const bench::ToolSpec spec = {
      .program = "gemm_power_bench",
      .about =
          "Times cuBLASLt's GEMM candidates for each dense GEMM of a recipe's step under the board's power cap:\n"
          "each candidate launched back to back for --seconds per round, rounds alternating their order; per\n"
          "candidate ms per GEMM, TFLOP/s, the ratio to the heuristic's first choice, board power and SM clock\n"
          "(NVML), and which candidate the step runs. Prints tables; writes nothing. Needs a CUDA GPU.",
      .flags = {
          {.name = "--recipe",
           .value = ToolValue::text,
           .default_value = "1b",
           .choices = {"1b", "small", "tiny", "all"},
           .help = "which recipe's dense GEMMs"},
          {.name = "--ranks",
           .default_value = "6",
           .min = 1,
           .max = 16,
           .help = "cuBLASLt heuristic candidates per GEMM, from its first choice; with --explore, how many of "
                   "the explored configurations run the rounds"},
          {.name = "--seconds",
           .value = ToolValue::number,
           .default_value = "0.3",
           .min = 0.001,
           .max = 10,
           .value_name = "S",
           .help = "how long each candidate runs back to back per round"},
          {.name = "--rounds",
           .default_value = "4",
           .min = 1,
           .max = 10,
           .value_name = "R",
           .help = "rounds, alternating the candidates' order"},
          {.name = "--explore",
           .value = ToolValue::none,
           .help = "every tile of the first choice's algorithm on the --clusters shapes, not only the heuristic's "
                   "ranking (candidates named tTILE-cCLUSTER, cublasLt.h enum values)"},
          {.name = "--clusters",
           .list = true,
           .default_value = "2,3,5",
           .min = 2,
           .max = 64,
           .value_name = "ID,ID,...",
           .help = "--explore's cluster shapes as cublasLt.h's CUBLASLT_CLUSTER_SHAPE_* values (2,3,5: 1x1, 2x1, "
                   "1x2; 4,6,8: 4x1, 2x2, 1x4)"},
          {.name = "--host-launches",
           .value = ToolValue::none,
           .help = "launch the GEMMs from the host one by one, not from CUDA graphs of up to 100 launches as the "
                   "step does (host launches time the host where a GEMM is shorter than a launch, as at tiny)"},
          {.name = "--ops",
           .value = ToolValue::text,
           .list = true,
           .default_value = "forward,backward_input,backward_weight",
           .choices = {"forward", "backward_input", "backward_weight"},
           .value_name = "OP,OP,...",
           .help = "which ops of each linear"},
          {.name = "--grad-dtype",
           .value = ToolValue::text,
           .default_value = "fp32",
           .choices = {"fp32", "bf16"},
           .help = "the weight gradient's output (bf16: the step's with ddp.grad_reduce_in_fp32=false)"},
          {.name = "--linears",
           .value = ToolValue::text,
           .list = true,
           .choices = {"qkv", "o", "fc1", "fc2", "lm_head"},
           .value_name = "NAME,...",
           .help = "which linears (default all)"},
          {.name = "--lm-head-rows",
           .min = 1,
           .max = 65536,
           .help = "rows of the LM head's chunk (default: the default budget's, 4096 at 1b and small; 8192 is "
                   "their one chunk with STEPGRAPH_LM_HEAD_CHUNK_MIB=1024)"},
          {.name = "--rows",
           .min = 1,
           .max = 65536,
           .help = "rows of every GEMM, the LM head's included (default: the recipe's tokens; 1 to 8 are the "
                   "decoding step's matrix-vector products, `stepgraph generate` at that batch)"},
      }};
  return spec;
}

// --help and usage errors exit in read_tool_args, before any CUDA call.
Args parse(int argc, char** argv) {
  const bench::ToolArgs p = bench::read_tool_args(argc, argv, tool_spec());
  Args a;
  a.recipe = p.text("--recipe");
  a.ranks = static_cast<int>(p.integer("--ranks"));
  a.seconds = p.number("--seconds");
  a.rounds = static_cast<int>(p.integer("--rounds"));
  a.explore = p.on("--explore");
  a.graphs = !p.on("--host-launches");
  for (const std::string& id : p.items("--clusters")) a.clusters.push_back(std::strtoll(id.c_str(), nullptr, 10));
  for (const std::string& name : p.items("--ops")) {
    for (const Op op : {Op::forward, Op::backward_input, Op::backward_weight}) {
      if (name == op_name(op)) a.ops.push_back(op);
    }
  }
  a.grad_dtype = p.text("--grad-dtype") == "bf16" ? kernels::FloatDtype::bf16 : kernels::FloatDtype::fp32;
  a.linears = p.items("--linears");
  if (p.given("--lm-head-rows")) a.lm_head_rows = p.integer("--lm-head-rows");
  if (p.given("--rows")) a.rows = p.integer("--rows");
  if (a.rows > 0 && a.lm_head_rows > 0) {
    std::fprintf(stderr,
                 "gemm_power_bench: --rows sets the LM head's rows too: give --rows or --lm-head-rows, not "
                 "both; see gemm_power_bench --help\n");
    std::exit(2);
  }
  return a;
}

// --explore: the configurations cuBLASLt accepts beyond its ranking, screened by one short timing each at the cap;
// appends the --ranks fastest, then the step's choice where it is not among them.
void explore(kernels::Blas& blas, const Linear& l, Op op, const Args& args, const Operands& ops, cuda::Stream& stream,
             bench::PowerSampler& sampler, std::vector<const kernels::GemmPlan*>& plans,
             std::vector<std::string>& labels) {
  const kernels::GemmPlan& first = *plans[0];
  std::vector<std::pair<double, size_t>> screened;
  std::vector<const kernels::GemmPlan*> found;
  std::vector<std::string> found_labels;
  // The board to its limit before the screen; each screened configuration then runs about 5 ms of the first
  // choice's launches, at least 30 (1b's and small's shapes) and at most 1000 (tiny's).
  const double first_ms = sustained(first, ops, op, 400, args.graphs, stream, sampler).ms;
  const int64_t screen_launches = std::clamp<int64_t>(static_cast<int64_t>(5.0 / first_ms), 30, 1000);
  for (int64_t tile : first.tile_ids()) {
    for (int64_t cluster : args.clusters) {
      kernels::GemmDesc d = desc_of(l, op, kernels::GemmDesc::kPreferredAlgo, args.grad_dtype);
      d.requested_config = {.tile_id = tile, .cluster_id = cluster};
      const kernels::GemmPlan* plan = nullptr;
      try {
        plan = &blas.plan(d);
      } catch (const Error&) {
        continue;  // cuBLASLt cannot run this tile on this cluster for this GEMM
      }
      if (plan->algo_summary() == first.algo_summary()) continue;
      screened.emplace_back(sustained(*plan, ops, op, screen_launches, args.graphs, stream, sampler).ms, found.size());
      found.push_back(plan);
      found_labels.push_back(strprintf("t%lld-c%lld", (long long)tile, (long long)cluster));
    }
  }
  std::sort(screened.begin(), screened.end());
  std::printf("# %s %s: %zu configurations beside the first choice; the %d fastest in a short screen run the rounds\n",
              l.name, op_name(op), found.size(), args.ranks);
  for (size_t i = 0; i < screened.size() && static_cast<int>(i) < args.ranks; ++i) {
    plans.push_back(found[screened[i].second]);
    labels.push_back(found_labels[screened[i].second]);
  }
  const kernels::GemmPlan& step = blas.plan(desc_of(l, op, kernels::GemmDesc::kPreferredAlgo, args.grad_dtype));
  const bool listed = std::any_of(plans.begin(), plans.end(),
                                  [&](const kernels::GemmPlan* p) { return p->algo_summary() == step.algo_summary(); });
  if (!listed) {
    plans.push_back(&step);
    labels.push_back("step");
  }
}

int run(int argc, char** argv) {
  const Args args = parse(argc, argv);
  cuda::require_device("gemm_power_bench");
  bench::PowerSampler sampler;
  std::printf("GPU: %s\npower sampling: %s\n", cuda::device_properties().summary().c_str(),
              sampler.available() ? "NVML" : sampler.unavailable().c_str());
  if (args.lm_head_rows > 0) {
    std::printf("LM head: chunks of %lld rows (--lm-head-rows)\n", static_cast<long long>(args.lm_head_rows));
  }
  if (args.rows > 0) std::printf("every GEMM: %lld rows (--rows)\n", static_cast<long long>(args.rows));
  std::printf("%-6s %-8s %-16s %8s %10s %8s %7s %13s %7s %7s  %s\n", "recipe", "linear", "op", "cand", "ms",
              "TFLOP/s", "vs 0", "rounds", "W", "MHz", "algorithm (cublasLt.h enum values)");
  cuda::Stream stream;
  kernels::Blas blas;
  for (const Recipe& recipe : recipes()) {
    if (args.recipe != "all" && args.recipe != recipe.name) continue;
    for (Linear l : recipe.linears) {
      if (!args.linears.empty() && std::find(args.linears.begin(), args.linears.end(), l.name) == args.linears.end()) {
        continue;
      }
      if (args.lm_head_rows > 0 && std::string(l.name) == "lm_head") l.T = args.lm_head_rows;
      if (args.rows > 0) l.T = args.rows;
      for (const Op op : args.ops) {
        const kernels::FloatDtype g = args.grad_dtype;
        std::vector<const kernels::GemmPlan*> plans{&blas.plan(desc_of(l, op, 0, g))};  // no algorithm at all: an error
        std::vector<std::string> labels{"0"};
        const Operands ops(desc_of(l, op, 0, g));
        if (args.explore) {
          explore(blas, l, op, args, ops, stream, sampler, plans, labels);
        } else {
          for (int r = 1; r < args.ranks; ++r) {
            try {
              plans.push_back(&blas.plan(desc_of(l, op, r, g)));
              labels.push_back(std::to_string(r));
            } catch (const Error&) {
              break;  // cuBLASLt offers fewer candidates for this GEMM
            }
          }
        }
        const double flop = 2.0 * static_cast<double>(l.T) * static_cast<double>(l.K) * static_cast<double>(l.N);
        // Launch counts from a short warm-up of each candidate, so each round runs about --seconds.
        std::vector<int64_t> launches;
        for (const kernels::GemmPlan* plan : plans) {
          const Timing warm = sustained(*plan, ops, op, 20, args.graphs, stream, sampler);
          launches.push_back(std::max<int64_t>(20, static_cast<int64_t>(args.seconds * 1e3 / warm.ms)));
        }
        const size_t n = plans.size();
        std::vector<std::vector<Timing>> t(n);
        // The board idles while the operands are made: bring it to its limit before the first timed round.
        sustained(*plans[0], ops, op, launches[0], args.graphs, stream, sampler);
        for (int round = 0; round < args.rounds; ++round) {
          for (size_t i = 0; i < n; ++i) {
            const size_t r = round % 2 == 0 ? i : n - 1 - i;
            t[r].push_back(sustained(*plans[r], ops, op, launches[r], args.graphs, stream, sampler));
          }
        }
        const auto mean_ms = [&](size_t r) {
          double s = 0.0;
          for (const Timing& x : t[r]) s += x.ms;
          return s / static_cast<double>(t[r].size());
        };
        // The ratio to rank 0 round by round: its spread says how far to trust the mean.
        const auto round_ratios = [&](size_t r) {
          double lo = 1e30, hi = 0.0;
          for (size_t i = 0; i < t[r].size(); ++i) {
            lo = std::min(lo, t[0][i].ms / t[r][i].ms);
            hi = std::max(hi, t[0][i].ms / t[r][i].ms);
          }
          return strprintf("%.3f-%.3f", lo, hi);
        };
        const std::string step_choice =
            blas.plan(desc_of(l, op, kernels::GemmDesc::kPreferredAlgo, g)).algo_summary();
        for (size_t r = 0; r < n; ++r) {
          const bench::PowerSummary& p = t[r].back().power;
          std::printf("%-6s %-8s %-16s %8s %10.4f %8.1f %7.3f %13s %7.0f %7.0f  %s%s\n", recipe.name, l.name,
                      op_name(op), labels[r].c_str(), mean_ms(r), flop / (mean_ms(r) * 1e9), mean_ms(0) / mean_ms(r),
                      round_ratios(r).c_str(), p.measured() ? p.power_median_w : 0.0,
                      p.measured() ? p.sm_clock_median_mhz : 0.0, plans[r]->algo_summary().c_str(),
                      plans[r]->algo_summary() == step_choice ? "  <- the step's" : "");
        }
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_power_bench: %s\n", e.what());
    return 1;
  }
}

#pragma once
// Which cuBLASLt algorithm a dense GEMM of the bench recipes runs where the heuristic's first choice is not the
// fastest in the step, and the environment variable that turns the table off (read at each plan):
// unset or 1 = the table (the default), 0 = the heuristic's first choice everywhere. Any other value is an error
// naming the variable. Apart from the GEMM plan so that it is tested on any machine.
//
// Why: at llama/small and llama/1b the H200 runs at its 700 W limit and lowers its clock, so a GEMM's speed in the step
// follows the energy it spends; cuBLASLt's heuristic ranks its candidates for speed at full clock. At llama/tiny (no
// power cap) its first choices mostly run 2x4 and 4x2 clusters, which small tiles on 1x1, 2x1 or 1x2 clusters beat on
// these few-microsecond GEMMs. bench/gemm_power_bench.cu times each candidate back to back (since the nineteenth
// session launched from graphs, as in the step; docs/performance.md, seventeenth to nineteenth sessions); an entry here
// names the configuration (tile and cluster, cublasLt.h's enum values) that beat the first choice there. The plan looks
// for it among the heuristic's first kPreferenceCandidates results, and else sets that tile and cluster on the first
// choice's algorithm where cublasLtMatmulAlgoCheck accepts it (some of the entries are configurations the heuristic
// does not rank). Both are fixed functions of the shape, so the choice is as deterministic as the heuristic itself;
// where that cuBLASLt cannot run it, the plan keeps the first choice (and says so in the debug log).
#include <cstdint>
#include <optional>

namespace sg::kernels {

struct GemmDesc;

inline constexpr const char* kGemmPreferencesVariable = "STEPGRAPH_GEMM_PREFERENCES";
inline constexpr int kPreferenceCandidates = 8;

struct GemmAlgoConfig {
  int64_t tile_id = 0;     // CUBLASLT_ALGO_CONFIG_TILE_ID
  int64_t cluster_id = 0;  // CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID
};

// The configuration the table prefers for `desc` on a GPU of compute capability `cc` (90 = Hopper; the table's
// measurements are an H200's), or nothing: not in the table, another GPU, or the variable is 0.
std::optional<GemmAlgoConfig> preferred_gemm_config(const GemmDesc& desc, int cc);

}  // namespace sg::kernels

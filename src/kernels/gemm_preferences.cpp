// kernels/gemm_preferences.h: the table and its environment override.
#include "kernels/gemm_preferences.h"

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "kernels/gemm.h"

namespace sg::kernels {
namespace {

// cublasLt.h's enum values (cuBLASLt 13.1).
constexpr int64_t kTile16x64 = 47, kTile32x64 = 12, kTile64x32 = 13, kTile64x64 = 15, kTile128x128 = 20,
                  kTile128x160 = 29, kTile144x128 = 184, kTile176x128 = 201, kTile176x256 = 203, kTile256x128 = 24,
                  kTile256x168 = 503, kTile352x128 = 256;
constexpr int64_t kCluster1x1 = 2, kCluster2x1 = 3, kCluster1x2 = 5;

struct Entry {
  bool transpose_a, transpose_b;
  int64_t m, n, k;
  GemmDtype d_type;
  GemmAlgoConfig config;
};

// Shapes as kernels::linear_*_desc writes them (forward: m = N out features, n = T tokens, k = K in features, A
// transposed; input gradient: m = K, n = T, k = N; weight gradient: m = K, n = N, k = T, fp32 D). A configuration
// is here when gemm_power_bench found it faster than the first choice in every round (the speedup's range over the
// rounds in brackets; s17 = seventeenth session, s18 = eighteenth, where --explore also tried configurations the
// heuristic does not rank, s19 = nineteenth, --explore with the GEMMs launched from graphs; docs/performance.md).
constexpr Entry kTable[] = {
    // llama/1b: QKV forward (s18: 1.03x [1.00-1.07]), fc1 forward (s18: 1.10x [1.10-1.10] and 1.07x [1.07-1.07]
    // in two calls, where s17's 128x256 2x1 gave 1.05x and 1.02x), LM-head forward (s17: 1.06x [1.06-1.07]).
    {true, false, 6144, 8192, 2048, GemmDtype::kBF16, {kTile176x128, kCluster1x2}},
    {true, false, 11264, 8192, 2048, GemmDtype::kBF16, {kTile176x128, kCluster1x2}},
    {true, false, 32768, 4096, 2048, GemmDtype::kBF16, {kTile176x128, kCluster1x2}},
    // llama/1b: fc1 input gradient (s18: 1.02x [1.01-1.03]; not among the heuristic's candidates).
    {false, false, 2048, 8192, 11264, GemmDtype::kBF16, {kTile256x168, kCluster1x1}},
    // llama/1b weight gradients: fc1 (s18: 1.02x [1.01-1.03]), fc2 (s18: 1.04x [1.03-1.04]; not among the
    // heuristic's candidates), LM head, a 4096-row chunk (s18: 1.03x [1.03-1.03]).
    {false, true, 2048, 11264, 8192, GemmDtype::kFP32, {kTile128x128, kCluster1x2}},
    {false, true, 5632, 2048, 8192, GemmDtype::kFP32, {kTile352x128, kCluster1x1}},
    {false, true, 2048, 32768, 4096, GemmDtype::kFP32, {kTile128x160, kCluster2x1}},
    // llama/1b weight gradients into bf16 main gradients (ddp.grad_reduce_in_fp32=false), --explore at the cap
    // (s23c4): QKV (1.02x [1.01-1.03]), fc1 (1.03x [1.01-1.04]), fc2 (1.05x [1.02-1.07]). Not taken: the output
    // projection's best, 1.007x [1.002-1.012], under the calls' spread.
    {false, true, 2048, 6144, 8192, GemmDtype::kBF16, {kTile256x128, kCluster1x2}},
    {false, true, 2048, 11264, 8192, GemmDtype::kBF16, {kTile176x256, kCluster2x1}},
    {false, true, 5632, 2048, 8192, GemmDtype::kBF16, {kTile352x128, kCluster1x2}},
    // llama/small: QKV forward (s17: 1.08x [1.07-1.10]), fc1 forward (s17: 1.07x [1.04-1.11]), LM-head forward
    // (s17: 1.12x [1.11-1.13]).
    {true, false, 2304, 8192, 768, GemmDtype::kBF16, {kTile144x128, kCluster1x2}},
    {true, false, 4096, 8192, 768, GemmDtype::kBF16, {kTile128x160, kCluster2x1}},
    {true, false, 32768, 4096, 768, GemmDtype::kBF16, {kTile176x128, kCluster1x2}},
    // llama/tiny (1024 tokens; the heuristic's first choices there mostly run 64x48 tiles on 2x4 clusters or 32x64
    // on 4x2, these small tiles on 1x1, 2x1 or 1x2 clusters): QKV input gradient (s19: 1.09x [1.08-1.09]), output
    // projection forward (1.04x [1.04-1.04]), input gradient (1.03x [1.03-1.03]) and weight gradient (1.07x
    // [1.07-1.07]), fc1 input gradient (1.10x [1.10-1.10]), fc2 forward (1.08x [1.08-1.08]) and weight gradient
    // (1.07x [1.07-1.07]), LM-head forward (1.12x [1.12-1.12]).
    {false, false, 256, 1024, 768, GemmDtype::kBF16, {kTile64x32, kCluster1x1}},
    {true, false, 256, 1024, 256, GemmDtype::kBF16, {kTile32x64, kCluster2x1}},
    {false, false, 256, 1024, 256, GemmDtype::kBF16, {kTile64x64, kCluster1x1}},
    {false, true, 256, 256, 1024, GemmDtype::kFP32, {kTile16x64, kCluster1x1}},
    {false, false, 256, 1024, 1408, GemmDtype::kBF16, {kTile64x32, kCluster1x2}},
    {true, false, 256, 1024, 704, GemmDtype::kBF16, {kTile32x64, kCluster2x1}},
    {false, true, 704, 256, 1024, GemmDtype::kFP32, {kTile32x64, kCluster1x1}},
    {true, false, 8192, 1024, 256, GemmDtype::kBF16, {kTile176x128, kCluster1x2}},
};

bool enabled_by_environment() {
  const char* variable = kGemmPreferencesVariable;
  const char* v = std::getenv(variable);
  if (v == nullptr || std::string(v) == "1") return true;
  if (std::string(v) == "0") return false;
  throw Error(std::string(variable) + "='" + v +
              "': must be 1 (the measured GEMM preferences; the default) or 0 (cuBLASLt's first choice everywhere)");
}

}  // namespace

std::optional<GemmAlgoConfig> preferred_gemm_config(const GemmDesc& d, int cc) {
  if (!enabled_by_environment() || cc != 90) return std::nullopt;
  if (d.a_type != GemmDtype::kBF16 || d.epilogue != GemmEpilogue::kNone) return std::nullopt;
  for (const Entry& e : kTable) {
    if (e.transpose_a == d.transpose_a && e.transpose_b == d.transpose_b && e.m == d.m && e.n == d.n && e.k == d.k &&
        e.d_type == d.d_type) {
      return e.config;
    }
  }
  return std::nullopt;
}

}  // namespace sg::kernels

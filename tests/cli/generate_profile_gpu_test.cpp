// `stepgraph generate --profile` through the real binary on the GPU decoder: a Hugging Face Llama folder
// (tests/checkpoint/make_hf_llama.py), 8 decoding steps graphed and eager. The profile counts what the step
// launches (per layer per step: the four linears through the matrix-vector kernel, the QKV projection with RoPE and
// the KV-cache append fused into it and the MLP's activation into fc1, so no RoPE, append or SwiGLU launch; attention
// once, one split at this 14-position cache; the step's argmax and advance once), its busy time fits inside the
// measured decoding time, and tracing changes no token.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cuda/device.h"
#include "process_util.h"

namespace {

namespace fs = std::filesystem;
using sg::test::run_command;
using sg::test::shell_quote;
using sg::test::stepgraph_source_dir;

nlohmann::json generate_json(const std::string& folder, const std::string& flags) {
  const auto r =
      run_command(shell_quote(sg::test::stepgraph_binary()) + " generate " + shell_quote(folder) +
                  " --prompt-tokens 1,2,3,4,5 --max-new-tokens 9 --ignore-eos --json " + flags + " 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << flags << "\n" << r.output;
  return r.exit_code == 0 ? nlohmann::json::parse(r.output) : nlohmann::json::object();
}

int64_t launches_of(const nlohmann::json& profile, const std::string& kernel_part) {
  int64_t launches = 0;
  for (const auto& row : profile["kernels"]) {
    if (row["kernel"].get<std::string>().find(kernel_part) != std::string::npos) {
      launches += row["launches"].get<int64_t>();
    }
  }
  return launches;
}

TEST(GenerateProfileGpu, CountsTheStepsKernelsAndChangesNoToken) {
  if (sg::cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  const fs::path dir = fs::temp_directory_path() / ("sg_generate_profile_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string folder = (dir / "hf").string();
  const int layers = 3;
  const auto made = run_command("python3 " + shell_quote(stepgraph_source_dir()) +
                                "/tests/checkpoint/make_hf_llama.py --vocab 320 --hidden 64 --heads 4 --kv-heads 2 "
                                "--ffn 96 --layers " +
                                std::to_string(layers) + " --out " + shell_quote(folder) + " 2>&1");
  ASSERT_EQ(made.exit_code, 0) << made.output;

  const nlohmann::json plain = generate_json(folder, "");
  for (const std::string flags : {"--profile", "--profile --no-graphs"}) {
    const nlohmann::json traced = generate_json(folder, flags);
    ASSERT_TRUE(traced.contains("profile")) << flags;
    EXPECT_EQ(traced["tokens"], plain["tokens"]) << flags << ": tracing changed the tokens";
    const nlohmann::json& p = traced["profile"];
    const int64_t steps = p["steps"].get<int64_t>();
    EXPECT_EQ(steps, 8) << flags;  // 9 new tokens: the first from the prefill, 8 decoding steps
    EXPECT_EQ(launches_of(p, "attention_split_kernel"), steps * layers) << flags << "\n" << p.dump(1);
    EXPECT_EQ(launches_of(p, "attention_merge_kernel"), 0) << flags;
    EXPECT_EQ(launches_of(p, "decode_linear_kernel"), 4 * steps * layers) << flags << ": qkv, o, fc1 and fc2";
    EXPECT_EQ(launches_of(p, "kv_cache_append_kernel"), 0) << flags << ": the append is in the QKV projection";
    EXPECT_EQ(launches_of(p, "rope_kernel"), 0) << flags << ": RoPE is in the QKV projection";
    EXPECT_EQ(launches_of(p, "swiglu_forward_kernel"), 0) << flags << ": SwiGLU is in fc1";
    EXPECT_EQ(launches_of(p, "decode_advance_kernel"), steps) << flags;
    EXPECT_EQ(launches_of(p, "argmax_kernel"), steps) << flags << ": greedy, one argmax a step";
    const double busy_ms = p["busy_ns"].get<double>() / 1e6;
    EXPECT_GT(busy_ms, 0.0) << flags;
    EXPECT_LE(busy_ms, traced["decode_ms"].get<double>()) << flags << ": the device was busy longer than decoding took";
  }
  fs::remove_all(dir);
}

}  // namespace

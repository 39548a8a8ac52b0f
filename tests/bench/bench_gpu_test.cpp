// `stepgraph bench --compare` end to end on the GPU: a short run of recipes/llama/tiny in the four modes
// of issue 7, read back from --json and --trace. Asserts that every mode measured finite step and host
// times, a positive CUPTI floor that graph replays contribute to (kernels inside graphs are traced), a
// step time not below the floor, the expected graphs, memory fields, and that all modes ended at the
// same loss (they ran the same steps from the same state).
#include <gtest/gtest.h>

#include "process_util.h"
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/device.h"

namespace {

constexpr int kSteps = 8;
constexpr int kWarmup = 2;
constexpr int kFloorSteps = 3;
// The floor comes from CUPTI-traced steps among the timed ones; the timed median may dip slightly below
// it (tracing adds a little to each kernel), never far.
constexpr double kMinEfficiency = 0.95;

int run(const std::vector<std::string>& args, std::string& output) {
  const sg::test::CommandResult r = sg::test::run_stepgraph(args);
  output += r.output;
  return r.exit_code;
}

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

double number(const nlohmann::json& value) {
  return value.is_number() ? value.get<double>() : std::nan("");
}

TEST(BenchGpu, CompareFourModesOnTiny) {
  if (sg::cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "stepgraph_bench_gpu_test";
  std::filesystem::create_directories(dir);
  const std::filesystem::path json_path = dir / "bench.json";
  const std::filesystem::path trace_path = dir / "trace.json";
  std::filesystem::remove(json_path);
  std::filesystem::remove(trace_path);

  const std::vector<std::string> labels = {"none", "local", "transformer_engine:attn", "transformer_engine:attn+mlp"};
  std::string output;
  const int rc = run({"bench", "-m", "llama", "-mr", "tiny", "-g", "h200", "-c", "bf16", "-ng", "1", "--compare",
                      "none,local,transformer_engine:attn,transformer_engine:attn+mlp", "--steps",
                      std::to_string(kSteps), "--warmup", std::to_string(kWarmup), "--floor-steps",
                      std::to_string(kFloorSteps), "--json", json_path.string(), "--trace", trace_path.string(),
                      "--plain"},
                     output);
  ASSERT_EQ(rc, 0) << output;
  for (const auto& label : labels) EXPECT_NE(output.find(label), std::string::npos) << label << "\n" << output;

  const nlohmann::json j = read_json(json_path);
  for (const char* key : {"recipe", "flags", "model", "batch", "schedule", "device", "arena_bytes", "losses_agree",
                          "notes", "modes"}) {
    ASSERT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["schedule"]["steps_per_mode"], kWarmup + 1 + kSteps + kFloorSteps);
  ASSERT_EQ(j["modes"].size(), labels.size());
  const double arena = number(j["arena_bytes"]);
  EXPECT_GT(arena, 0);

  double eager_records = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const nlohmann::json& m = j["modes"][i];
    SCOPED_TRACE(labels[i]);
    EXPECT_EQ(m["label"], labels[i]);
    for (const char* key : {"cuda_graph_impl", "cuda_graph_scope", "step_ms", "mean_step_ms", "tokens_per_s",
                            "tflops_per_gpu", "mfu", "host_launch_ms", "floor", "efficiency", "capture", "graphs",
                            "memory", "final_loss", "optimizer_steps"}) {
      ASSERT_TRUE(m.contains(key)) << key;
    }
    // Times: every measured step has a finite, positive event time and host time.
    ASSERT_EQ(m["step_ms"]["samples"].size(), static_cast<size_t>(kSteps));
    for (const auto& s : m["step_ms"]["samples"]) EXPECT_GT(number(s), 0.0);
    for (const auto& s : m["host_launch_ms"]["samples"]) EXPECT_GT(number(s), 0.0);
    const double median = number(m["step_ms"]["median"]);
    EXPECT_TRUE(std::isfinite(median) && median > 0);
    EXPECT_GE(number(m["step_ms"]["p90"]), median);
    EXPECT_GT(number(m["tokens_per_s"]), 0.0);
    EXPECT_GT(number(m["tflops_per_gpu"]), 0.0);
    // The floor: positive, below the step time (within clock noise), from every record CUPTI had.
    const double floor = number(m["floor"]["ms_per_step"]);
    EXPECT_GT(floor, 0.0);
    EXPECT_EQ(m["floor"]["dropped_records"], 0);
    EXPECT_GE(number(m["efficiency"]), kMinEfficiency);
    const double records = number(m["floor"]["kernels"]) + number(m["floor"]["memsets"]) + number(m["floor"]["memcpys"]);
    if (i == 0) {
      eager_records = records;
    } else {
      // Graph modes run the same work: their replayed kernels must show up in CUPTI like eager ones.
      EXPECT_GE(records, 0.9 * eager_records);
    }
    // Graphs: local one whole-step graph; scoped one forward and one backward graph per graphed layer.
    // llama/tiny's 4 GPT blocks are 8 layers of the stack (attention, MLP, ...): attn graphs half of them.
    const int layers = m["graphs"]["total_layers"];
    EXPECT_EQ(layers, 8);
    const int graphed_layers = i == 0 ? 0 : i == 2 ? layers / 2 : layers;
    const int expected_graphs = i == 0 ? 0 : i == 1 ? 1 : 2 * graphed_layers;
    EXPECT_EQ(m["graphs"]["created"], expected_graphs);
    EXPECT_EQ(m["graphs"]["graphable_layers"], graphed_layers);
    EXPECT_EQ(m["capture"]["captured"], i != 0);
    if (i != 0) {
      EXPECT_GT(number(m["capture"]["total_ms"]), 0.0);
      EXPECT_GT(number(m["capture"]["step_ms"]), 0.0);
      EXPECT_GT(number(m["graphs"]["replays"]), 0.0);
    }
    // Memory: the device holds at least the arena (one memory plan: the only one); eager is the reference.
    EXPECT_EQ(number(m["memory"]["arena_bytes"]), arena);
    EXPECT_GE(number(m["memory"]["peak_bytes"]), arena);
    EXPECT_TRUE(m["memory"]["overhead_vs_eager_bytes"].is_number());
    EXPECT_TRUE(std::isfinite(number(m["final_loss"])));
    EXPECT_EQ(m["optimizer_steps"], kWarmup + 1 + kSteps + kFloorSteps);
    // Power and clock through the driver's NVML: sampled from the first measured step on (at least one sample),
    // with plausible values on any data-centre GPU.
    const nlohmann::json& power = m["power"];
    EXPECT_TRUE(power["unavailable"].is_null()) << power.dump();
    EXPECT_GE(power["samples"].get<int>(), 1);
    EXPECT_GT(number(power["median_w"]), 10.0);
    EXPECT_GE(number(power["max_w"]), number(power["median_w"]));
    EXPECT_GT(number(power["limit_w"]), 100.0);
    EXPECT_GT(number(power["sm_clock_median_mhz"]), 100.0);
    EXPECT_GE(number(power["sm_clock_device_max_mhz"]), number(power["sm_clock_min_mhz"]));
  }
  EXPECT_EQ(j["modes"][0]["memory"]["overhead_vs_eager_bytes"], 0);
  EXPECT_TRUE(j["losses_agree"].get<bool>()) << j["notes"].dump();

  // The trace: one process per mode, each with complete events.
  const nlohmann::json trace = read_json(trace_path);
  std::set<int> pids_with_events;
  std::vector<std::string> process_names;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") {
      pids_with_events.insert(e["pid"].get<int>());
      EXPECT_GE(number(e["dur"]), 0.0);
    }
    if (e["ph"] == "M" && e["name"] == "process_name") process_names.push_back(e["args"]["name"]);
  }
  EXPECT_EQ(process_names, labels);
  EXPECT_EQ(pids_with_events.size(), labels.size());
}

// Recompute settings in the mode list: each memory plan gets its own arena (the previous one freed), so
// a recomputing mode's peak is below its partner's by about the arena it saves; losses stay bitwise equal.
TEST(BenchGpu, RecomputeModesMeasureTheirOwnMemory) {
  if (sg::cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "stepgraph_bench_gpu_test";
  std::filesystem::create_directories(dir);
  const std::filesystem::path json_path = dir / "bench_recompute.json";
  std::filesystem::remove(json_path);
  std::string output;
  const int rc = run({"bench", "-m", "llama", "-mr", "tiny", "--compare",
                      "local,local+recompute_full,transformer_engine:attn+mlp,"
                      "transformer_engine:attn+mlp+recompute_selective=core_attn/mlp",
                      "--steps", "4", "--warmup", "2", "--floor-steps", "0", "--json", json_path.string(), "--plain"},
                     output);
  ASSERT_EQ(rc, 0) << output;
  EXPECT_NE(output.find("peak vs no recompute"), std::string::npos) << output;
  const nlohmann::json j = read_json(json_path);
  EXPECT_TRUE(j["losses_agree"].get<bool>()) << j["notes"].dump();
  ASSERT_EQ(j["memory_plans"].size(), 3u);
  ASSERT_EQ(j["modes"].size(), 4u);
  for (const size_t i : {size_t{1}, size_t{3}}) {
    const nlohmann::json& m = j["modes"][i];
    const nlohmann::json& base = j["modes"][i - 1];
    SCOPED_TRACE(m["label"].get<std::string>());
    EXPECT_EQ(m["recompute"]["without_recompute_mode"], base["label"]);
    const double arena = number(m["memory"]["arena_bytes"]);
    const double base_arena = number(base["memory"]["arena_bytes"]);
    EXPECT_LT(arena, base_arena);
    EXPECT_GE(number(m["memory"]["peak_bytes"]), arena);
    EXPECT_LT(number(m["recompute"]["activation_bytes"]), number(m["recompute"]["activation_bytes_without_recompute"]));
    // The previous arena was freed: the peak drops by the arena saved, within allocation granularity.
    const double peak_delta = number(m["recompute"]["peak_vs_without_recompute_bytes"]);
    EXPECT_LE(peak_delta, arena - base_arena + 4.0 * (1 << 20));
    EXPECT_TRUE(std::isfinite(number(m["recompute"]["step_vs_without_recompute_percent"])));
  }
}

}  // namespace

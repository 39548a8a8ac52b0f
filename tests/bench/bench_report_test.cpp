// The pure parts of `stepgraph bench` behind the numbers: order statistics, the CUPTI floor arithmetic,
// the Chrome trace, and the table/JSON built from made-up results (so every derived figure is checked
// against a hand computation).
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_html.h"
#include "bench/bench_options.h"
#include "bench/bench_plan.h"
#include "bench/bench_stats.h"
#include "bench/chrome_trace.h"
#include "bench/device_activity.h"
#include "bench/report.h"
#include "checkpoint/durable_io.h"
#include "core/strings.h"
#include "graph/scope_plan.h"
#include "kernels/lm_head.h"
#include "test_util.h"
#include "train/metrics.h"
#include "train/svg_chart.h"

namespace sg::bench {
namespace {

using graph::GraphImpl;

TEST(BenchStats, PercentilesInterpolateBetweenRanks) {
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 0.9), 3.7);  // 1 + 0.9*3 = 2.7 -> 3 + 0.7*(4-3)
  EXPECT_DOUBLE_EQ(percentile({5}, 0.9), 5.0);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3}, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3}, 1.0), 3.0);
  EXPECT_TRUE(std::isnan(percentile({}, 0.5)));
  EXPECT_THROW(percentile({1.0}, 1.5), Error);
  EXPECT_THROW(percentile({1.0, NAN}, 0.5), Error);
  std::vector<double> fifty;
  for (int i = 1; i <= 50; ++i) fifty.push_back(i);
  EXPECT_DOUBLE_EQ(percentile(fifty, 0.9), 45.1);  // 0.9*49 = 44.1 -> 45 + 0.1
}

TEST(BenchStats, SampleStatsSummarizesAndEmptyIsNaN) {
  const SampleStats s = sample_stats({10, 12, 11, 30});
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.median, 11.5);
  EXPECT_DOUBLE_EQ(s.mean, 15.75);
  EXPECT_DOUBLE_EQ(s.min, 10);
  EXPECT_DOUBLE_EQ(s.max, 30);
  EXPECT_DOUBLE_EQ(s.p90, 12 + 0.7 * 18);
  const SampleStats e = sample_stats({});
  EXPECT_EQ(e.count, 0u);
  EXPECT_TRUE(std::isnan(e.median) && std::isnan(e.p90) && std::isnan(e.mean));
}

ActivityRecord rec(ActivityKind kind, uint64_t start, uint64_t end, uint32_t stream = 7, std::string name = "") {
  ActivityRecord r;
  r.kind = kind;
  r.start_ns = start;
  r.end_ns = end;
  r.stream = stream;
  r.name = std::move(name);
  return r;
}

TEST(DeviceActivity, FloorIsTheUnionOfBusyIntervals) {
  // Serial kernels with a gap: busy = sum of durations; the gap counts in the span only.
  const ActivitySummary serial = summarize_activity({rec(ActivityKind::kernel, 1000, 1100),
                                                     rec(ActivityKind::memset, 1100, 1150),
                                                     rec(ActivityKind::kernel, 1200, 1300)});
  EXPECT_EQ(serial.kernels, 2u);
  EXPECT_EQ(serial.memsets, 1u);
  EXPECT_EQ(serial.kernel_ns, 200u);
  EXPECT_EQ(serial.memset_ns, 50u);
  EXPECT_EQ(serial.duration_sum_ns(), 250u);
  EXPECT_EQ(serial.busy_ns, 250u);
  EXPECT_EQ(serial.span_ns, 300u);
  // Overlapping and nested operations on two streams, delivered out of order: the union counts once.
  const ActivitySummary overlap = summarize_activity({rec(ActivityKind::kernel, 150, 400, 2),
                                                      rec(ActivityKind::kernel, 100, 200, 1),
                                                      rec(ActivityKind::memcpy, 160, 170, 3),
                                                      rec(ActivityKind::kernel, 500, 600, 1)});
  EXPECT_EQ(overlap.duration_sum_ns(), 250u + 100u + 10u + 100u);
  EXPECT_EQ(overlap.busy_ns, 300u + 100u);  // [100,400) and [500,600)
  EXPECT_EQ(overlap.span_ns, 500u);
  EXPECT_EQ(overlap.memcpys, 1u);
  // Records without valid timestamps are counted apart and change nothing else.
  const ActivitySummary bad = summarize_activity({rec(ActivityKind::kernel, 0, 0), rec(ActivityKind::kernel, 50, 40),
                                                  rec(ActivityKind::kernel, 10, 20)});
  EXPECT_EQ(bad.invalid, 2u);
  EXPECT_EQ(bad.kernels, 1u);
  EXPECT_EQ(bad.busy_ns, 10u);
  EXPECT_EQ(summarize_activity({}).busy_ns, 0u);
  ActivitySummary total = serial;
  total += overlap;
  EXPECT_EQ(total.busy_ns, 650u);
  EXPECT_EQ(total.records(), 7u);
}

TEST(ChromeTrace, OneProcessPerModeOneThreadPerStreamTimesInMicroseconds) {
  std::vector<TraceProcess> processes = {
      {"none", {rec(ActivityKind::kernel, 5000, 7500, 13, "_Z6kernelPfi"), rec(ActivityKind::memset, 8000, 9000, 13)}},
      {"local", {rec(ActivityKind::kernel, 100000, 100250, 21, "sm90_xmma_gemm"), rec(ActivityKind::kernel, 0, 0, 21)}}};
  processes[1].records[0].graph_id = 4;
  processes[0].records[1].bytes = 4096;
  const nlohmann::json trace = nlohmann::json::parse(chrome_trace_json(processes, R"({"recipe": "llama/tiny"})"));
  EXPECT_EQ(trace["otherData"]["recipe"], "llama/tiny");
  std::vector<nlohmann::json> complete, names;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") complete.push_back(e);
    if (e["ph"] == "M" && e["name"] == "process_name") names.push_back(e);
  }
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0]["args"]["name"], "none");
  EXPECT_EQ(names[1]["args"]["name"], "local");
  ASSERT_EQ(complete.size(), 3u);  // the record without timestamps is left out
  EXPECT_EQ(complete[0]["name"], "kernel(float*, int)");
  EXPECT_EQ(complete[0]["pid"], 0);
  EXPECT_EQ(complete[0]["tid"], 13);
  EXPECT_DOUBLE_EQ(complete[0]["ts"].get<double>(), 0.0);  // from the mode's first record
  EXPECT_DOUBLE_EQ(complete[0]["dur"].get<double>(), 2.5);
  EXPECT_EQ(complete[1]["cat"], "memset");
  EXPECT_DOUBLE_EQ(complete[1]["ts"].get<double>(), 3.0);
  EXPECT_EQ(complete[1]["args"]["bytes"], 4096);
  EXPECT_EQ(complete[2]["name"], "sm90_xmma_gemm");  // not mangled: unchanged
  EXPECT_EQ(complete[2]["pid"], 1);
  EXPECT_DOUBLE_EQ(complete[2]["ts"].get<double>(), 0.0);
  EXPECT_EQ(complete[2]["args"]["graph_id"], 4);
  bool stream_named = false;
  for (const auto& e : trace["traceEvents"]) {
    if (e["name"] == "thread_name" && e["pid"] == 1 && e["tid"] == 21) stream_named = e["args"]["name"] == "stream 21";
  }
  EXPECT_TRUE(stream_named);
  EXPECT_EQ(demangle("not_mangled"), "not_mangled");
  EXPECT_EQ(demangle("_Zbroken"), "_Zbroken");
}

// A plan for llama/tiny compared in three modes, and made-up measurements with easy numbers.
struct Fixture {
  BenchPlan plan;
  BenchResults results;
};

ModeResult made_up_mode(const std::string& label, GraphImpl impl, double step_ms, double floor_ms,
                        uint64_t peak) {
  ModeResult m;
  m.label = label;
  m.impl = graph::graph_impl_name(impl);
  for (int i = 0; i < 10; ++i) {
    m.step_ms.push_back(step_ms + 0.01 * i);  // median = step_ms + 0.045
    m.host_ms.push_back(0.5);
  }
  m.window_ms = 10 * step_ms + 1.0;
  m.floor_steps = 4;
  m.floor.kernels = 400;
  m.floor.kernel_ns = static_cast<uint64_t>(floor_ms * 4 * 1e6);
  m.floor.busy_ns = m.floor.kernel_ns;
  m.memory_before_capture = peak - 1000;
  m.memory_after_capture = peak;
  m.memory_peak = peak;
  m.final_loss = 9.0;
  m.captured = impl != GraphImpl::none;
  m.capture_ms = m.captured ? 20.0 : 0.0;
  m.instantiate_ms = m.captured ? 5.0 : 0.0;
  m.graphs_created = impl == GraphImpl::local ? 1 : m.captured ? 16 : 0;
  m.graphable_layers = m.captured ? 4 : 0;
  m.total_layers = 4;
  return m;
}

Fixture fixture() {
  Fixture f;
  f.plan = plan_bench(parse_bench_args({"-m", "llama", "-mr", "tiny", "--compare",
                                        "none,local,transformer_engine:attn+mlp", "--steps", "10", "--floor-steps",
                                        "4", "-g", "h200"}));
  f.results.env.device_name = "NVIDIA H200";
  f.results.env.device_summary = "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)";
  f.results.env.peak_tflops = 989.0;
  f.results.env.arena_bytes = 1 << 30;
  f.results.modes = {made_up_mode("none", GraphImpl::none, 4.0, 2.0, 2'000'000'000),
                     made_up_mode("local", GraphImpl::local, 2.0, 2.0, 2'000'100'000),
                     made_up_mode("transformer_engine:attn+mlp", GraphImpl::transformer_engine, 2.2, 2.0,
                                  1'999'000'000)};
  return f;
}

// The floor the run's progress line prints is the table's: the median of the floor steps' busy times (the line took
// their mean, so one slow traced step moved it), their mean where per-step times are missing, none without records.
TEST(BenchReport, TheFloorIsTheMedianOfTheTracedSteps) {
  ModeResult m;
  EXPECT_FALSE(floor_median_ms(m).has_value());
  m.floor_steps = 3;
  m.floor.kernels = 30;
  m.floor.busy_ns = 12'000'000;  // 1 + 1 + 10 ms
  m.floor_step_ms = {1.0, 10.0, 1.0};
  ASSERT_TRUE(floor_median_ms(m).has_value());
  EXPECT_EQ(*floor_median_ms(m), 1.0);
  m.floor_step_ms.clear();
  EXPECT_EQ(*floor_median_ms(m), 4.0);
  m.floor.kernels = 0;
  EXPECT_FALSE(floor_median_ms(m).has_value());
}

TEST(BenchReport, DerivedFiguresMatchAHandComputation) {
  const Fixture f = fixture();
  const BenchReport r = summarize(f.plan, f.results);
  ASSERT_EQ(r.modes.size(), 3u);
  const double tokens = 4.0 * 256;  // micro batch 4 x seq 256, one microbatch
  const double flops = train::training_flops_per_step(f.plan.model, f.plan.batch);
  const ModeSummary& local = r.modes[1];
  EXPECT_NEAR(local.step_ms.median, 2.045, 1e-12);
  EXPECT_NEAR(local.tokens_per_s, tokens / 2.045e-3, 1e-6);
  EXPECT_NEAR(local.tflops, flops / 2.045e-3 / 1e12, 1e-9);
  EXPECT_NEAR(local.mfu, local.tflops / 989.0, 1e-12);
  EXPECT_NEAR(*local.floor_ms, 2.0, 1e-9);
  EXPECT_NEAR(*local.efficiency, 2.045 / 2.0, 1e-9);
  EXPECT_NEAR(local.mean_step_ms, 2.1, 1e-12);  // (10 * 2.0 + 1.0) / 10
  EXPECT_NEAR(*local.capture_total_ms, 25.0, 1e-12);
  EXPECT_EQ(*local.graph_memory_bytes, 1000);
  EXPECT_EQ(*local.overhead_vs_eager_bytes, 100'000);
  EXPECT_NEAR(*local.overhead_vs_eager_percent, 100.0 * 100'000 / 2e9, 1e-12);
  EXPECT_EQ(*r.modes[2].overhead_vs_eager_bytes, -1'000'000);
  EXPECT_EQ(*r.modes[0].overhead_vs_eager_bytes, 0);
  EXPECT_FALSE(r.modes[0].capture_total_ms.has_value());  // eager captured nothing
  EXPECT_TRUE(r.losses_agree);
  EXPECT_TRUE(r.notes.empty());
}

TEST(BenchReport, FloorIsTheMedianOfTheTracedSteps) {
  Fixture f = fixture();
  ModeResult& local = f.results.modes[1];
  local.floor_step_ms = {2.0, 2.0, 6.0, 2.0};  // one traced step ran slow
  local.floor.busy_ns = 12'000'000;
  const BenchReport r = summarize(f.plan, f.results);
  EXPECT_NEAR(*r.modes[1].floor_ms, 2.0, 1e-12);
  EXPECT_NEAR(*r.modes[1].floor_mean_ms, 3.0, 1e-12);
  EXPECT_NEAR(*r.modes[1].efficiency, 2.045 / 2.0, 1e-12);
  const nlohmann::json j = nlohmann::json::parse(report_json(f.plan, f.results, r));
  EXPECT_NEAR(j["modes"][1]["floor"]["ms_per_step"].get<double>(), 2.0, 1e-12);
  EXPECT_NEAR(j["modes"][1]["floor"]["mean_ms_per_step"].get<double>(), 3.0, 1e-12);
  EXPECT_EQ(j["modes"][1]["floor"]["per_step_ms"].size(), 4u);
  EXPECT_TRUE(j["modes"][1]["graphs"].contains("memset_nodes_lowered"));
  // Without one busy time per floor step (older results), the mean is all there is.
  local.floor_step_ms.pop_back();
  EXPECT_NEAR(*summarize(f.plan, f.results).modes[1].floor_ms, 3.0, 1e-12);
}

TEST(BenchReport, NotesSayWhatIsMissingOrWrong) {
  Fixture f = fixture();
  f.results.modes[1].final_loss = 9.000001;
  f.results.modes[2].dropped_records = 3;
  f.results.modes[0].floor.busy_ns = 4 * 8'000'000;  // floor 8 ms > step 4 ms
  const BenchReport r = summarize(f.plan, f.results);
  EXPECT_FALSE(r.losses_agree);
  EXPECT_FALSE(r.modes[2].floor_ms.has_value());  // incomplete floor is not shown
  std::string all;
  for (const auto& n : r.notes) all += n + "\n";
  EXPECT_NE(all.find("different losses"), std::string::npos) << all;
  EXPECT_NE(all.find("dropped 3 activity records"), std::string::npos) << all;
  EXPECT_NE(all.find("below the floor"), std::string::npos) << all;
  // Without impl none there is nothing to compare memory against.
  Fixture g = fixture();
  g.results.modes.erase(g.results.modes.begin());
  const BenchReport no_eager = summarize(g.plan, g.results);
  EXPECT_FALSE(no_eager.modes[0].overhead_vs_eager_bytes.has_value());
  EXPECT_NE(no_eager.notes.front().find("add none to --compare"), std::string::npos);
}

TEST(BenchReport, TableHasEveryColumnAndRow) {
  const Fixture f = fixture();
  const std::string table = format_report(f.plan, f.results, summarize(f.plan, f.results));
  for (const char* column : {"mode", "step ms", "p90 ms", "tokens/s", "TFLOP/s", "MFU", "host ms", "floor ms",
                             "step/floor", "capture ms", "graphs", "layers", "peak mem", "vs eager"}) {
    EXPECT_NE(table.find(column), std::string::npos) << column;
  }
  EXPECT_NE(table.find("stepgraph bench llama/tiny on NVIDIA H200"), std::string::npos) << table;
  EXPECT_NE(table.find("transformer_engine:attn+mlp"), std::string::npos);
  EXPECT_NE(table.find("1.022x"), std::string::npos) << table;  // local: 2.045 / 2.0
  EXPECT_NE(table.find("2.045"), std::string::npos);
  EXPECT_NE(table.find("(reference)"), std::string::npos);
  EXPECT_NE(table.find("+97.66 KiB (+0.005%)"), std::string::npos) << table;
  EXPECT_NE(table.find("4/4"), std::string::npos);
  EXPECT_NE(table.find("25.0"), std::string::npos);  // capture + instantiate
  EXPECT_NE(table.find("fp32 Adam moments"), std::string::npos) << table;
}

// A run with bf16 moments says so, in the table and the JSON, so its figure is not read as the fp32 step's.
TEST(BenchReport, Bf16MomentsAreNamed) {
  Fixture f = fixture();
  for (PlannedMode& mode : f.plan.modes) {
    mode.config.optimizer.use_precision_aware_optimizer = true;
    mode.config.optimizer.exp_avg_dtype = "bf16";
    mode.config.optimizer.exp_avg_sq_dtype = "bf16";
  }
  const BenchReport r = summarize(f.plan, f.results);
  const std::string table = format_report(f.plan, f.results, r);
  EXPECT_NE(table.find("exp_avg bf16, exp_avg_sq bf16"), std::string::npos) << table;
  EXPECT_NE(table.find("PyTorch's fused AdamW keeps them in fp32"), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(report_json(f.plan, f.results, r));
  EXPECT_EQ(j["optimizer"]["exp_avg_dtype"], "bf16");
  EXPECT_EQ(j["optimizer"]["exp_avg_sq_dtype"], "bf16");
}

// The LM head's chunking is in the JSON, with the budget STEPGRAPH_LM_HEAD_CHUNK_MIB sets for a measurement.
TEST(BenchReport, LmHeadChunkingIsRecorded) {
  const Fixture f = fixture();
  const auto head_of = [&f] {
    return nlohmann::json::parse(report_json(f.plan, f.results, summarize(f.plan, f.results)))["lm_head"];
  };
  {
    const test::ScopedEnv env(kernels::kLmHeadChunkBudgetVariable, nullptr);
    const nlohmann::json head = head_of();
    EXPECT_EQ(head["chunk_budget_bytes"], kernels::kLmHeadDefaultChunkBudgetBytes);
    EXPECT_EQ(head["chunks"], 1);  // llama/tiny's head fits one chunk
  }
  const test::ScopedEnv env(kernels::kLmHeadChunkBudgetVariable, "4");
  const nlohmann::json head = head_of();
  EXPECT_EQ(head["chunk_budget_bytes"], size_t{4} << 20);
  EXPECT_GT(head["chunks"].get<int64_t>(), 1);
  EXPECT_EQ(head["chunk_rows"].get<int64_t>() % 64, 0);
}

TEST(BenchReport, JsonHasEveryField) {
  const Fixture f = fixture();
  const nlohmann::json j = nlohmann::json::parse(report_json(f.plan, f.results, summarize(f.plan, f.results)));
  for (const char* key : {"recipe", "flags", "model", "batch", "schedule", "device", "arena_bytes", "losses_agree",
                          "notes", "modes"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["flags"]["gpu"], "h200");
  EXPECT_EQ(j["schedule"]["steps_per_mode"], 3 + 1 + 10 + 4);
  ASSERT_EQ(j["modes"].size(), 3u);
  const nlohmann::json& local = j["modes"][1];
  for (const char* key : {"label", "cuda_graph_impl", "cuda_graph_scope", "step_ms", "mean_step_ms", "tokens_per_s",
                          "tflops_per_gpu", "mfu", "host_launch_ms", "floor", "efficiency", "capture", "graphs",
                          "memory", "final_loss", "optimizer_steps"}) {
    EXPECT_TRUE(local.contains(key)) << key;
  }
  EXPECT_EQ(local["step_ms"]["samples"].size(), 10u);
  EXPECT_NEAR(local["step_ms"]["median"].get<double>(), 2.045, 1e-12);
  EXPECT_NEAR(local["floor"]["ms_per_step"].get<double>(), 2.0, 1e-9);
  EXPECT_EQ(local["memory"]["overhead_vs_eager_bytes"], 100000);
  EXPECT_TRUE(j["modes"][0]["capture"]["total_ms"].is_null());
  EXPECT_EQ(local["graphs"]["created"], 1);
  // The matmul share of the step's FLOPs (bench/kernel_table.py --bench divides it by the GEMM kernels' time).
  const train::StepFlops flops = train::training_flops_by_kind(f.plan.model, f.plan.batch);
  EXPECT_DOUBLE_EQ(j["batch"]["matmul_flops_per_step"].get<double>(), flops.matmul);
  EXPECT_DOUBLE_EQ(flops.total(), j["batch"]["flops_per_step"].get<double>());
}

TEST(BenchReport, PowerIsReportedPerModeOrWhyNot) {
  Fixture f = fixture();
  f.results.modes[1].power = summarize_power({{.power_w = 690, .sm_clock_mhz = 1600, .power_capped = true}}, 20.0,
                                             700.0, 1980.0, true);
  f.results.modes[0].power = summarize_power({}, 20.0, 0.0, 0.0, true, "libnvidia-ml.so.1 cannot be loaded");
  const BenchReport r = summarize(f.plan, f.results);
  const std::string table = format_report(f.plan, f.results, r);
  EXPECT_NE(table.find("power and SM clock during the measured steps (NVML):\n  none: not sampled: libnvidia-ml"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("  local: median 690 W of the 700 W limit"), std::string::npos) << table;
  EXPECT_NE(table.find("note: no power and SM clock samples: libnvidia-ml.so.1 cannot be loaded"), std::string::npos)
      << table;
  const nlohmann::json j = nlohmann::json::parse(report_json(f.plan, f.results, r));
  EXPECT_EQ(j["modes"][1]["power"]["samples"], 1);
  EXPECT_DOUBLE_EQ(j["modes"][1]["power"]["median_w"].get<double>(), 690.0);
  EXPECT_DOUBLE_EQ(j["modes"][1]["power"]["power_capped_share"].get<double>(), 1.0);
  EXPECT_TRUE(j["modes"][1]["power"]["unavailable"].is_null());
  EXPECT_EQ(j["modes"][0]["power"]["unavailable"], "libnvidia-ml.so.1 cannot be loaded");
  const std::string html = report_html(f.plan, f.results, r);
  EXPECT_NE(html.find("SM clock during the measured steps (median, NVML)"), std::string::npos);
  EXPECT_NE(html.find("1600 MHz"), std::string::npos);
  // Made-up results without any power figures (as from older runs) print no power section, note or chart.
  const Fixture g = fixture();
  const BenchReport without = summarize(g.plan, g.results);
  EXPECT_EQ(format_report(g.plan, g.results, without).find("power"), std::string::npos);
  EXPECT_EQ(report_html(g.plan, g.results, without).find("SM clock"), std::string::npos);
}

// The FLOPs by kind, by hand for a dense Llama stack: 6 x matmul parameters per token (the LM head, and per
// layer q, k, v, o and the three SwiGLU matrices), 12 x seq x q_dim per token per attention layer, no scan.
TEST(BenchReport, StepFlopsSplitIntoMatmulAndAttention) {
  model::ModelSpec m;
  m.num_layers = 2;
  m.hidden_size = 64;
  m.ffn_hidden_size = 160;
  m.num_attention_heads = 4;
  m.num_query_groups = 2;
  m.seq_length = 32;
  m.vocab_size = 100;
  model::BatchSpec b;
  b.micro_batch_size = 3;
  b.num_microbatches = 2;
  const double tokens = 3.0 * 2.0 * 32.0;
  const double per_layer = 64.0 * (64 + 2 * 32) + 64.0 * 64 + 3.0 * 64 * 160;  // qkv (kv of 2 groups x 16), o, mlp
  const train::StepFlops flops = train::training_flops_by_kind(m, b);
  EXPECT_DOUBLE_EQ(flops.matmul, 6.0 * (100.0 * 64 + 2 * per_layer) * tokens);
  EXPECT_DOUBLE_EQ(flops.attention, 12.0 * 2 * 32.0 * 64 * tokens);
  EXPECT_EQ(flops.scan, 0.0);
  EXPECT_DOUBLE_EQ(train::training_flops_per_step(m, b), flops.total());
}

// Modes with activation recompute: step time and peak memory against the same graph mode without it,
// each memory plan's arena in the header, the recompute fields in the JSON, and every mode still in the
// bitwise loss comparison.
TEST(BenchReport, RecomputeModesCompareWithTheSameGraphModeWithoutRecompute) {
  Fixture f = fixture();
  for (ModeResult& m : f.results.modes) m.arena_bytes = 1 << 30;
  ModeResult full = made_up_mode("local+recompute_full", GraphImpl::local, 2.5, 2.4, 1'500'000'000);
  full.recompute = "full=uniform/1";
  full.memory_plan = 1;
  full.arena_bytes = 1 << 29;
  ModeResult orphan = made_up_mode("transformer_engine:attn+recompute_selective", GraphImpl::transformer_engine, 2.3,
                                   2.2, 1'900'000'000);
  orphan.scope = {"attn"};  // no transformer_engine:attn without recompute was listed
  orphan.recompute = "selective=core_attn";
  orphan.memory_plan = 2;
  orphan.arena_bytes = 3 << 28;
  f.results.modes.push_back(full);
  f.results.modes.push_back(orphan);
  const BenchReport r = summarize(f.plan, f.results);
  ASSERT_EQ(r.modes.size(), 5u);
  const ModeSummary& s = r.modes[3];
  EXPECT_EQ(s.without_recompute, "local");
  EXPECT_NEAR(*s.step_vs_without_recompute_percent, 100.0 * (2.545 - 2.045) / 2.045, 1e-9);
  EXPECT_EQ(*s.peak_vs_without_recompute_bytes, 1'500'000'000 - 2'000'100'000);
  EXPECT_NEAR(*s.peak_vs_without_recompute_percent, 100.0 * -500'100'000 / 2'000'100'000, 1e-9);
  EXPECT_EQ(*s.overhead_vs_eager_bytes, -500'000'000);
  EXPECT_FALSE(r.modes[1].without_recompute.has_value());  // local recomputes nothing
  EXPECT_FALSE(r.modes[4].step_vs_without_recompute_percent.has_value());
  std::string notes;
  for (const auto& n : r.notes) notes += n + "\n";
  EXPECT_NE(notes.find("transformer_engine:attn+recompute_selective: no 'vs no recompute' figures: add the same "
                       "graph mode without recompute (transformer_engine:attn)"),
            std::string::npos)
      << notes;
  EXPECT_TRUE(r.losses_agree);

  const std::string table = format_report(f.plan, f.results, r);
  for (const char* text : {"recompute", "step vs no recompute", "peak vs no recompute", "full=uniform/1",
                           "selective=core_attn", "+24.4%", "(-25.0%)"}) {
    EXPECT_NE(table.find(text), std::string::npos) << text << "\n" << table;
  }
  EXPECT_NE(table.find("arena " + human_bytes(1 << 30) + " (none, local, transformer_engine:attn+mlp), " +
                       human_bytes(1 << 29) + " (local+recompute_full), " + human_bytes(3 << 28) +
                       " (transformer_engine:attn+recompute_selective): one per memory plan"),
            std::string::npos)
      << table;

  const nlohmann::json j = nlohmann::json::parse(report_json(f.plan, f.results, r));
  const nlohmann::json& rc = j["modes"][3]["recompute"];
  EXPECT_EQ(rc["setting"], "full=uniform/1");
  EXPECT_EQ(rc["without_recompute_mode"], "local");
  EXPECT_NEAR(rc["step_vs_without_recompute_percent"].get<double>(), 100.0 * 0.5 / 2.045, 1e-9);
  EXPECT_EQ(rc["peak_vs_without_recompute_bytes"], 1'500'000'000 - 2'000'100'000);
  EXPECT_TRUE(j["modes"][1]["recompute"]["without_recompute_mode"].is_null());
  EXPECT_EQ(j["modes"][1]["recompute"]["setting"], "none");
  EXPECT_EQ(j["modes"][3]["memory"]["arena_bytes"], 1 << 29);
  EXPECT_EQ(j["modes"][3]["memory"]["memory_plan"], 1);
  ASSERT_EQ(j["memory_plans"].size(), 1u);  // the fixture's plan: three modes, no recompute
  EXPECT_EQ(j["memory_plans"][0]["recompute"], "none");

  // Eager with recompute is not the eager reference, wherever it is listed.
  Fixture g = fixture();
  ModeResult eager_full = made_up_mode("none+recompute_full", GraphImpl::none, 5.0, 4.0, 1'200'000'000);
  eager_full.recompute = "full=uniform/1";
  g.results.modes.insert(g.results.modes.begin(), eager_full);
  const BenchReport eager = summarize(g.plan, g.results);
  EXPECT_EQ(*eager.modes[1].overhead_vs_eager_bytes, 0);
  EXPECT_EQ(*eager.modes[0].overhead_vs_eager_bytes, -800'000'000);
  EXPECT_EQ(eager.modes[0].without_recompute, "none");

  // Recompute is bitwise equal to no recompute: a recomputing mode that ends elsewhere is reported.
  f.results.modes[3].final_loss = 9.5;
  const BenchReport differ = summarize(f.plan, f.results);
  EXPECT_FALSE(differ.losses_agree);
  EXPECT_NE(differ.notes.back().find("local+recompute_full 9.5"), std::string::npos) << differ.notes.back();
  EXPECT_NE(differ.notes.back().find("activation recompute are meant to be bitwise equal"), std::string::npos);
}

TEST(BenchReport, SignedBytes) {
  EXPECT_EQ(signed_bytes(0), "0 B");
  EXPECT_EQ(signed_bytes(2048), "+" + human_bytes(2048));
  EXPECT_EQ(signed_bytes(-512), "-" + human_bytes(512));
  EXPECT_EQ(signed_bytes(INT64_MIN), "-" + human_bytes(uint64_t{1} << 63));
}

// --html: one self-contained page with per-mode bars and step-time histograms; written to
// $SG_BENCH_HTML when set, so it can be rendered and looked at.
TEST(BenchReport, HtmlPageHasPerModeBarsAndHistograms) {
  const Fixture f = fixture();
  const BenchReport r = summarize(f.plan, f.results);
  const std::string html = report_html(f.plan, f.results, r);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* text : {"median step time", "tokens per second", "kernel-time floor (CUPTI)",
                           "capture + instantiate", "peak device memory", "Step time distributions",
                           "transformer_engine:attn+mlp (10 steps)", "2.045 ms", "NVIDIA H200"}) {
    EXPECT_NE(html.find(text), std::string::npos) << text;
  }
  size_t svgs = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++svgs;
  EXPECT_EQ(svgs, 6u + 3u);  // six bar charts, one histogram per mode
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  if (const char* out = std::getenv("SG_BENCH_HTML")) checkpoint::write_file_atomically(out, html);
}

}  // namespace
}  // namespace sg::bench

// train/metrics.h's truncate_metrics_after over a long run's metrics.jsonl (a line a step, ~270 bytes: 2.7 GB at
// 10M steps): a resume that cuts the records after its checkpoint streams the kept ones into the replacement, so
// its host memory does not grow with the file (the whole kept text was one string before: this test's 64 MB file
// raised the peak resident memory by more than 64 MB); a file with nothing to drop is left as it is.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "core/strings.h"
#include "process_memory.h"
#include "test_dir.h"
#include "train/metrics.h"

namespace sg::train {
namespace {

// A step record as MetricsLog writes it (~270 bytes).
std::string record(int64_t step) {
  return strprintf(
      "{\"step\": %lld, \"loss\": 2.12345678, \"grad_norm\": 0.234567891, \"lr\": 0.000299999881, "
      "\"step_ms\": 1234.5678, \"tokens_per_s\": 3400000.0, \"tflops_per_gpu\": 400.123, \"mfu\": 0.40456, "
      "\"device_memory_used\": 70000000000, \"wall_time_s\": 1234567.890, \"tokens\": %lld}\n",
      static_cast<long long>(step), static_cast<long long>(step) * 4194304);
}

TEST(MetricsTruncation, ALongRunsRecordsAreCutWithoutHoldingThemInMemory) {
  test::ScratchDir dir("metrics_long_cut");
  const std::string path = dir / "metrics.jsonl";
  constexpr int64_t kSteps = 250'000;  // ~64 MB
  {
    std::ofstream out(path, std::ios::binary);
    for (int64_t step = 1; step <= kSteps; ++step) out << record(step);
  }
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  ASSERT_GT(before.st_size, 60'000'000);
  const int64_t peak_before = test::peak_resident_bytes();
  const MetricsTruncation cut = truncate_metrics_after(path, kSteps - 10);  // the checkpoint was 10 steps back
  const int64_t grown = test::peak_resident_bytes() - peak_before;
  EXPECT_EQ(cut.kept, static_cast<size_t>(kSteps - 10));
  EXPECT_EQ(cut.dropped, 10u);
  if (!test::kSanitizedAllocator) {
    EXPECT_LT(grown, 24 << 20) << "cutting a " << before.st_size
                               << "-byte metrics.jsonl raised the peak resident memory by " << grown << " bytes";
  }
  // The kept records, whole and in order.
  std::ifstream in(path, std::ios::binary);
  std::string line;
  int64_t step = 0;
  while (std::getline(in, line)) {
    ++step;
    if (line + "\n" != record(step)) {
      ADD_FAILURE() << "line " << step << ": " << line;
      break;
    }
  }
  EXPECT_EQ(step, kSteps - 10);
}

TEST(MetricsTruncation, AFileWithNothingToDropStaysAsItIs) {
  test::ScratchDir dir("metrics_no_cut");
  const std::string path = dir / "metrics.jsonl";
  {
    std::ofstream out(path, std::ios::binary);
    for (int64_t step = 1; step <= 3; ++step) out << record(step);
  }
  struct stat before {
  }, after{};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  const MetricsTruncation cut = truncate_metrics_after(path, 3);
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_EQ(cut.kept, 3u);
  EXPECT_EQ(cut.dropped, 0u);
  EXPECT_EQ(after.st_ino, before.st_ino) << "the file was replaced";
  EXPECT_FALSE(std::ifstream(path + ".tmp-" + std::to_string(::getpid())).good()) << "a temporary was left";
}

}  // namespace
}  // namespace sg::train

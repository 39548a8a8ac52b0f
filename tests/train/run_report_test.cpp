// train/run_report.h over metrics.jsonl: the report reduces the records while it reads them (the charts' envelopes,
// train/svg_chart.h; the numbers it prints as they are), so a long run's report takes the same memory as a short
// one's (a line a step: 7 numbers a step were held before, ~560 MB at 10M steps; this test's 400k steps raised the
// peak resident memory by 52 MB); past 1000 evaluations its table lists one in a power of two and says so; a line
// is read as a JSON parser reads it (a torn line, a line that is no object or has no step is no record; a key given
// twice counts with its last value).
#include "train/run_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/strings.h"
#include "process_memory.h"
#include "test_dir.h"

namespace sg::train {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A step record as MetricsLog writes it.
std::string step_record(int64_t step, double loss) {
  return strprintf(
      "{\"step\": %lld, \"loss\": %.9g, \"grad_norm\": 0.234567891, \"lr\": 0.000299999881, \"step_ms\": 1234.5678, "
      "\"tokens_per_s\": 3400000.0, \"tflops_per_gpu\": 400.123, \"mfu\": 0.40456, \"device_memory_used\": "
      "70000000000, \"wall_time_s\": 1234567.890, \"tokens\": %lld%s}\n",
      static_cast<long long>(step), loss, static_cast<long long>(step) * 4096, step == 2 ? ", \"capture\": true" : "");
}

std::string eval_record(int64_t step, double val_loss) {
  return strprintf(
      "{\"step\": %lld, \"val_loss\": %.9g, \"val_ppl\": %.9g, \"eval_batches\": 4, \"eval_ms\": 81.5, "
      "\"wall_time_s\": 12.5, \"tokens\": %lld}\n",
      static_cast<long long>(step), val_loss, std::exp(val_loss), static_cast<long long>(step) * 4096);
}

// report.html of a metrics.jsonl holding `text`.
std::string report_of(const test::ScratchDir& dir, const std::string& text) {
  const std::string metrics = dir / "metrics.jsonl", html = dir / "report.html";
  {
    std::ofstream out(metrics, std::ios::binary);
    out << text;
  }
  RunReportInfo info;
  info.title = "stepgraph run: test";
  info.status = "finished";
  write_run_report(metrics, html, info);
  return read_file(html);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(RunReport, ALongRunsReportTakesBoundedMemory) {
  test::ScratchDir dir("report_long");
  constexpr int64_t kSteps = 400'000, kEvalInterval = 10;  // ~110 MB of records; 40000 evaluations
  const std::string metrics = dir / "metrics.jsonl", html = dir / "report.html";
  {
    std::FILE* out = std::fopen(metrics.c_str(), "w");
    ASSERT_NE(out, nullptr);
    for (int64_t step = 1; step <= kSteps; ++step) {
      const double loss = 2.0 + 8.0 / static_cast<double>(step) + (step == 300'001 ? 5.0 : 0.0);
      std::fputs(step_record(step, loss).c_str(), out);
      if (step % kEvalInterval == 0) std::fputs(eval_record(step, loss + 0.125).c_str(), out);
    }
    ASSERT_EQ(std::fclose(out), 0);
  }
  RunReportInfo info;
  info.title = "stepgraph run: long";
  const int64_t peak_before = test::peak_resident_bytes();
  write_run_report(metrics, html, info);
  const int64_t grown = test::peak_resident_bytes() - peak_before;
  if (!test::kSanitizedAllocator) {  // a sanitizer's allocator keeps freed memory resident
    EXPECT_LT(grown, 16 << 20) << "the report of " << kSteps << " steps raised the peak resident memory by " << grown
                               << " bytes";
  }
  const std::string page = read_file(html);
  EXPECT_LT(page.size(), 1u << 20);
  EXPECT_NE(page.find("<th>steps in metrics.jsonl</th><td>1 to 400000</td>"), std::string::npos);
  EXPECT_NE(page.find("<th>last loss</th><td>2.0000</td>"), std::string::npos);
  EXPECT_NE(page.find("<th>last val loss</th><td>2.1250 (ppl 8.373) at step 400000</td>"), std::string::npos);
  EXPECT_NE(page.find("graph capture"), std::string::npos);
  // 40000 evaluations: one in 64 listed (625 rows: evaluations 1, 65, ..., 39937), and the last.
  EXPECT_NE(page.find("<p>40000 evaluations; listed: the 1st, 65th, 129th, ... (one in 64) and the last. "
                      "metrics.jsonl holds them all.</p>"),
            std::string::npos);
  const std::string table = page.substr(page.find("<h2>Evaluations</h2>"));
  EXPECT_EQ(count(table, "<tr><td>"), 626u);
  EXPECT_NE(table.find("<tr><td>10</td>"), std::string::npos);
  EXPECT_NE(table.find("<tr><td>650</td>"), std::string::npos);
  EXPECT_EQ(table.find("<tr><td>20</td>"), std::string::npos);
  EXPECT_NE(table.find("<tr><td>399370</td>"), std::string::npos);
  EXPECT_NE(table.find("<tr><td>400000</td>"), std::string::npos);
}

TEST(RunReport, AFewEvaluationsAreAllListed) {
  test::ScratchDir dir("report_evals");
  std::string text;
  for (int64_t step = 1; step <= 30; ++step) {
    text += step_record(step, 3.0);
    if (step % 10 == 0) text += eval_record(step, 2.5);
  }
  const std::string page = report_of(dir, text);
  EXPECT_EQ(page.find("evaluations; listed"), std::string::npos);
  EXPECT_EQ(count(page.substr(page.find("<h2>Evaluations</h2>")), "<tr><td>"), 3u);
  EXPECT_EQ(page.find("No evaluation"), std::string::npos);
  EXPECT_NE(report_of(dir, step_record(1, 3.0)).find("No evaluation (validation.eval_interval is null)."),
            std::string::npos);
}

TEST(RunReport, ALineIsReadAsJsonReadsIt) {
  test::ScratchDir dir("report_lines");
  const auto fact = [&](const std::string& text, const std::string& name) {
    const std::string page = report_of(dir, text), th = "<th>" + name + "</th><td>";
    const size_t at = page.find(th);
    return at == std::string::npos ? std::string("(none)")
                                   : page.substr(at + th.size(), page.find("</td>", at) - at - th.size());
  };
  const std::string first = step_record(1, 3.0);
  // A torn last line (a killed run), a line that is no object, an object without a step: no record.
  EXPECT_EQ(fact(first + "{\"step\": 2, \"loss\": 1.5", "steps in metrics.jsonl"), "1 to 1");
  EXPECT_EQ(fact(first + "[{\"step\": 2, \"loss\": 1.5}]\n{\"loss\": 1.5}\n\n", "steps in metrics.jsonl"), "1 to 1");
  EXPECT_EQ(fact(first + "{\"step\": 2, \"loss\": 1.5} trailing\n", "last loss"), "3.0000");
  // A key given twice: its last value. A key inside a nested value is not the record's.
  EXPECT_EQ(fact(first + "{\"step\": 2, \"loss\": 1.5, \"loss\": 1.25}\n", "last loss"), "1.2500");
  EXPECT_EQ(fact(first + "{\"step\": 2, \"x\": {\"loss\": 9, \"step\": 7}, \"loss\": 0.5}\n", "steps in metrics.jsonl"),
            "1 to 2");
  EXPECT_EQ(fact(first + "{\"step\": 2, \"x\": [{\"loss\": 9}], \"loss\": 0.5}\n", "last loss"), "0.5000");
  // A value that is no number (null: a non-finite loss as MetricsLog writes it) prints as nan.
  EXPECT_EQ(fact(first + "{\"step\": 2, \"loss\": null}\n", "last loss"), "nan");
  EXPECT_EQ(fact(first + "{\"step\": 2, \"loss\": [1.5]}\n", "last loss"), "nan");
  EXPECT_EQ(fact(first + "{\"step\": 2, \"loss\": \"1.5\"}\n", "last loss"), "nan");
  // Integers, as large as device_memory_used gets, and exponents.
  EXPECT_EQ(fact(first + "{\"step\": 18446744073709551615, \"loss\": 2e-1}\n", "steps in metrics.jsonl"),
            "1 to 18446744073709551616");
  EXPECT_EQ(fact(first + "{\"step\": -3, \"loss\": 2E+1}\n", "last loss"), "20.0000");
  // A record with val_loss is an evaluation, whatever its value.
  EXPECT_EQ(fact(first + "{\"step\": 2, \"val_loss\": null, \"val_ppl\": 3}\n", "last val loss"),
            "nan (ppl 3.000) at step 2");
  // The capture step is marked; "capture" that is not true is no capture.
  EXPECT_NE(report_of(dir, first + step_record(2, 3.0)).find("graph capture"), std::string::npos);
  EXPECT_EQ(report_of(dir, first + "{\"step\": 2, \"loss\": 1, \"capture\": 1}\n").find("graph capture"),
            std::string::npos);
  EXPECT_EQ(report_of(dir, first + "{\"step\": 2, \"capture\": true, \"capture\": false}\n").find("graph capture"),
            std::string::npos);
}

}  // namespace
}  // namespace sg::train

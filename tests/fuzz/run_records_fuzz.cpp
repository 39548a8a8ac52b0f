// libFuzzer harness: a run folder's records as a run's end and a resume read them back (train/run_report.h,
// train/run_folder.h): metrics.jsonl into report.html (its charts' ticks and envelopes), and a resume's cut of
// metrics.jsonl back to a checkpoint's step, and its comparison of the folder's config.yaml with the new one.
// Input: metrics.jsonl, then (after a "\n=====\n" line) config.yaml.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "train/run_folder.h"
#include "train/run_report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& dir = sg::fuzz::scratch_dir("run_records");
  sg::fuzz::clear(dir);
  const auto parts = sg::fuzz::split_parts(data, size, 2);
  sg::fuzz::write_file(dir / sg::train::kMetricsJsonl, parts[0]);
  sg::fuzz::write_file(dir / sg::train::kConfigYaml, parts[1]);
  sg::fuzz::expect_sg_errors("run_records_fuzz", [&] {
    sg::train::RunReportInfo info;
    info.title = "stepgraph run: fuzz";
    sg::train::write_run_report((dir / sg::train::kMetricsJsonl).string(), (dir / sg::train::kReportHtml).string(),
                                info);
  });
  sg::fuzz::expect_sg_errors("run_records_fuzz", [&] {
    (void)sg::train::keep_changed_config(dir.string(), "model:\n  num_layers: 2\ncheckpoint:\n  load: null\n");
  });
  sg::fuzz::expect_sg_errors("run_records_fuzz", [&] { (void)sg::train::cut_records_after(dir.string(), 5); });
  return 0;
}

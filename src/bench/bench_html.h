#pragma once
// `stepgraph bench --html FILE`: the report as one self-contained HTML page (inline SVG, no script, no
// network): per-mode bars (median step time, tokens/s, host launch time, kernel-time floor, capture time,
// peak memory) and each mode's step-time histogram on a shared axis, with the run's header and notes.
// Pure CPU, built from the same BenchPlan/BenchResults/BenchReport as the table and the JSON.
#include <string>

#include "bench/bench_plan.h"
#include "bench/bench_results.h"
#include "bench/report.h"

namespace sg::bench {

std::string report_html(const BenchPlan& plan, const BenchResults& results, const BenchReport& report);

}  // namespace sg::bench

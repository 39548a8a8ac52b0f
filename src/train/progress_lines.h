#pragma once
// The lines `stepgraph train` prints while it runs: one per logged step and one per evaluation. On
// the GPU: step time, tokens/s, TFLOP/s, MFU (when the device's peak is known) and device memory; on
// the CPU backend what is meaningful there: step time, tokens/s, GFLOP/s and the process's resident
// memory (no MFU: a CPU has no bf16 peak to compare with).
#include <cstdint>
#include <string>

#include "train/metrics.h"

namespace sg::train {

std::string format_step_line(const StepMetrics& m, int64_t train_iters, bool gpu, bool peak_known);
// "step    100 | val loss 2.3456 | val ppl 10.44 | 4 batches in 0.83 s"
std::string format_eval_line(const EvalMetrics& m);
// Resident memory of this process in bytes (/proc/self/statm); 0 when unknown.
uint64_t process_resident_bytes();

}  // namespace sg::train

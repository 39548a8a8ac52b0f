#include "train/progress_lines.h"

#include <unistd.h>

#include <cstdio>

#include "core/strings.h"

namespace sg::train {

std::string format_step_line(const StepMetrics& m, int64_t train_iters, bool gpu, bool peak_known) {
  std::string line = strprintf("step %6lld/%lld | loss %.4f | grad norm %.3f | lr %.3e | %.2f ms | %.0f tok/s",
                               static_cast<long long>(m.step), static_cast<long long>(train_iters), m.loss,
                               m.grad_norm, m.lr, m.step_ms, m.tokens_per_s);
  if (gpu) {
    line += strprintf(" | %.1f TFLOP/s", m.tflops_per_gpu);
    if (peak_known) line += strprintf(" | MFU %.1f%%", m.mfu * 100);
    line += " | mem " + human_bytes(m.device_memory_used);
  } else {
    line += strprintf(" | %.2f GFLOP/s", m.tflops_per_gpu * 1e3);
    if (m.device_memory_used > 0) line += " | RSS " + human_bytes(m.device_memory_used);
  }
  return line;
}

std::string format_eval_line(const EvalMetrics& m) {
  const std::string what = m.test ? "test" : m.set.empty() ? "val" : "val " + m.set;
  return strprintf("step %6lld | %s loss %.4f | %s ppl %.3f | %lld batch%s in %.2f s", static_cast<long long>(m.step),
                   what.c_str(), m.val_loss, what.c_str(), m.val_ppl, static_cast<long long>(m.batches),
                   m.batches == 1 ? "" : "es", m.ms / 1e3);
}

uint64_t process_resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace sg::train

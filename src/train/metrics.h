#pragma once
// What a training step reports, and the arithmetic that turns it into throughput figures.
#include <cstdint>
#include <cstdio>
#include <string>

#include "model/spec.h"

namespace sg::train {

// Model FLOPs per training step: 6 x (matmul parameters) per token for forward+backward, plus the
// attention score and value products, 12 x attention layers x seq x hidden per token (PaLM appendix
// B; causal masking is not discounted, as in Megatron's MFU), summed over the layers of the stack
// (model/stack.h) as each kind declares them (model::LayerFlops, model/layer.h). Embedding lookups are
// not counted.
double training_flops_per_step(const model::ModelSpec& model, const model::BatchSpec& batch);

// The same FLOPs by kind: the matmuls (what GEMM kernels run), the attention products (cuDNN's
// attention kernels) and the SSD scan; training_flops_per_step is their sum.
struct StepFlops {
  double matmul = 0.0, attention = 0.0, scan = 0.0;
  double total() const { return matmul + attention + scan; }
};
StepFlops training_flops_by_kind(const model::ModelSpec& model, const model::BatchSpec& batch);

// Dense bf16 peak of the device in TFLOP/s, from its name (H100/H200 SXM: 989); 0 when unknown.
double peak_bf16_tflops(const std::string& device_name);

struct StepMetrics {
  int64_t step = 0;  // 1-based optimizer step
  float loss = 0.0f;
  float grad_norm = 0.0f;
  float lr = 0.0f;
  double step_ms = 0.0;
  double tokens_per_s = 0.0;
  double tflops_per_gpu = 0.0;
  double mfu = 0.0;  // fraction of peak, 0 when the peak is unknown
  uint64_t device_memory_used = 0;  // GPU: device memory in use; CPU: the process's resident memory
  double wall_time_s = 0.0;         // seconds since this process started training
  int64_t tokens = 0;               // tokens consumed by the run so far (step * tokens per step)
  bool capture = false;             // this step captured the CUDA graphs (its time includes the capture)
  // MoE models: their auxiliary losses (written as moe_aux_loss / moe_z_loss when `moe`).
  bool moe = false;
  float aux_loss = 0.0f, z_loss = 0.0f;
  // At the log interval: kept tokens per expert of the step, one row per MoE layer (moe_tokens_per_expert).
  std::vector<std::vector<int32_t>> moe_tokens;
};

// One evaluation (validation.eval_interval).
struct EvalMetrics {
  int64_t step = 0;  // the optimizer step after which it ran
  // The test split's (dataset.split's third share, evaluated once after the last step): metrics.jsonl writes
  // test_loss and test_ppl in place of val_loss and val_ppl.
  bool test = false;
  // The validation set's name (validation.multiple_validation_sets): metrics.jsonl adds "val_set", TensorBoard's tags
  // Megatron's "-NAME" suffix. "" for all the validation data and for the test data.
  std::string set;
  double val_loss = 0.0;
  double val_ppl = 0.0;  // exp(val_loss)
  int64_t batches = 0;
  double ms = 0.0;
  double wall_time_s = 0.0;
  int64_t tokens = 0;
};

struct EvalResult;  // train/backend.h
// An evaluation's record from its result: val_ppl = exp(loss).
EvalMetrics eval_metrics(int64_t step, const EvalResult& result, bool test, double wall_time_s, int64_t tokens);

// One JSON object per line; flushed after every record so a crash loses nothing written. A fresh run
// starts the file anew; a resumed run (append) continues it, after truncate_metrics_after has cut
// the records the checkpoint does not include. A failed write (a full disk) is an sg::Error, never
// a silently short file.
class MetricsLog {
 public:
  MetricsLog(const std::string& path, bool append);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void write(const StepMetrics& m);  // sg::Error naming the file and the reason on failure
  // {"step": N, "val_loss": x, "val_ppl": y, ...}: one line per evaluation, between the step lines.
  void write(const EvalMetrics& m);
  const std::string& path() const { return path_; }

 private:
  void check_written(int printed, int64_t step);  // after an fprintf: flush, and throw on any error
  std::string path_;
  std::FILE* file_ = nullptr;
};

struct MetricsTruncation {
  size_t kept = 0;     // records at or before the step
  size_t dropped = 0;  // records after it, and unreadable lines (a record cut by a crash)
};

// Rewrites `path` (atomically: temporary + rename) with only the records whose step is <= `step`,
// in their order: a run resumed from step 5 after an earlier one reached 8 must not leave steps 6-8
// in front of its own. A missing file is left missing, a file with nothing to drop as it is. The kept records are
// streamed (a few MiB of host memory, whatever the file's size: a line a step).
MetricsTruncation truncate_metrics_after(const std::string& path, int64_t step);

}  // namespace sg::train

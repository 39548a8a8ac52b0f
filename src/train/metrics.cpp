#include "train/metrics.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/strings.h"

namespace sg::train {

double training_flops_per_step(const model::ModelSpec& m, const model::BatchSpec& b) {
  const double H = static_cast<double>(m.hidden_size);
  const double L = static_cast<double>(m.num_layers);
  const double S = static_cast<double>(m.seq_length);
  const double per_layer_matmul =
      H * static_cast<double>(m.qkv_dim()) + H * H + 3.0 * H * static_cast<double>(m.ffn_hidden_size);
  const double matmul_params = L * per_layer_matmul + static_cast<double>(m.vocab_size) * H;
  const double per_token = 6.0 * matmul_params + 12.0 * L * S * H;
  const double tokens = static_cast<double>(b.micro_batch_size * b.num_microbatches) * S;
  return per_token * tokens;
}

double peak_bf16_tflops(const std::string& device_name) {
  if (device_name.find("H200") != std::string::npos) return 989.0;
  if (device_name.find("H100") != std::string::npos) return 989.0;
  if (device_name.find("A100") != std::string::npos) return 312.0;
  return 0.0;
}

MetricsLog::MetricsLog(const std::string& path, bool append) : path_(path) {
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  SG_CHECK(file_ != nullptr, strprintf("cannot open metrics file %s: %s", path.c_str(), std::strerror(errno)));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

namespace {
// JSON has no NaN or infinity: a non-finite value (NaN checks off) is written as null.
std::string json_number(double v) { return std::isfinite(v) ? strprintf("%.9g", v) : std::string("null"); }
}  // namespace

void MetricsLog::write(const StepMetrics& m) {
  std::fprintf(file_,
               "{\"step\": %lld, \"loss\": %s, \"grad_norm\": %s, \"lr\": %s, \"step_ms\": %.4f, "
               "\"tokens_per_s\": %.1f, \"tflops_per_gpu\": %.3f, \"mfu\": %.5f, \"device_memory_used\": %llu, "
               "\"wall_time_s\": %.3f, \"tokens\": %lld%s}\n",
               static_cast<long long>(m.step), json_number(m.loss).c_str(), json_number(m.grad_norm).c_str(),
               json_number(m.lr).c_str(), m.step_ms, m.tokens_per_s, m.tflops_per_gpu, m.mfu,
               static_cast<unsigned long long>(m.device_memory_used), m.wall_time_s,
               static_cast<long long>(m.tokens), m.capture ? ", \"capture\": true" : "");
  std::fflush(file_);
}

void MetricsLog::write(const EvalMetrics& m) {
  std::fprintf(file_,
               "{\"step\": %lld, \"val_loss\": %s, \"val_ppl\": %s, \"eval_batches\": %lld, \"eval_ms\": %.1f, "
               "\"wall_time_s\": %.3f, \"tokens\": %lld}\n",
               static_cast<long long>(m.step), json_number(m.val_loss).c_str(), json_number(m.val_ppl).c_str(),
               static_cast<long long>(m.batches), m.ms, m.wall_time_s, static_cast<long long>(m.tokens));
  std::fflush(file_);
}

}  // namespace sg::train

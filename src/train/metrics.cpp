#include "train/metrics.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/strings.h"
#include "model/stack.h"

namespace sg::train {

double training_flops_per_step(const model::ModelSpec& m, const model::BatchSpec& b) {
  const double H = static_cast<double>(m.hidden_size);
  const double S = static_cast<double>(m.seq_length);
  // Per layer of the stack: its matmul parameters, and the attention products of attention layers.
  double matmul_params = static_cast<double>(m.vocab_size) * H;  // the LM head
  double attention_layers = 0.0;
  for (const model::LayerKind kind : model::stack_layer_kinds(m)) {
    switch (kind) {
      case model::LayerKind::attention:
        matmul_params += H * static_cast<double>(m.qkv_dim()) + H * H;
        attention_layers += 1.0;
        break;
      case model::LayerKind::mlp: matmul_params += 3.0 * H * static_cast<double>(m.ffn_hidden_size); break;
      case model::LayerKind::moe:
      case model::LayerKind::mamba:
        throw Error(strprintf("training FLOPs of %s layers are not counted yet (train/metrics.cpp)",
                              model::layer_kind_info(kind).description));
    }
  }
  const double per_token = 6.0 * matmul_params + 12.0 * attention_layers * S * H;
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
               "\"tokens_per_s\": %.1f, \"tflops_per_gpu\": %.3f, \"mfu\": %.5f, \"device_memory_used\": %llu}\n",
               static_cast<long long>(m.step), json_number(m.loss).c_str(), json_number(m.grad_norm).c_str(),
               json_number(m.lr).c_str(), m.step_ms, m.tokens_per_s, m.tflops_per_gpu, m.mfu,
               static_cast<unsigned long long>(m.device_memory_used));
  std::fflush(file_);
}

}  // namespace sg::train

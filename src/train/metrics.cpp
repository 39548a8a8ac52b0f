#include "train/metrics.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/durable_io.h"
#include "core/error.h"
#include "core/strings.h"
#include "model/layer_registry.h"
#include "model/stack.h"
#include "train/backend.h"

namespace sg::train {

StepFlops training_flops_by_kind(const model::ModelSpec& m, const model::BatchSpec& b) {
  const double H = static_cast<double>(m.hidden_size);
  const double S = static_cast<double>(m.seq_length);
  // Per layer of the stack, as its kind declares it (model/layer.h): matmul weights, attention products
  // (in H-wide attention layers) and scan FLOPs.
  double matmul_params = static_cast<double>(m.vocab_size) * H;  // the LM head
  double attention_layers = 0.0, scan_flops_per_token = 0.0;
  for (const model::LayerKind kind : model::stack_layer_kinds(m)) {
    const model::LayerFlops layer = model::layer_kind_flops_per_token(kind, m);
    matmul_params += layer.matmul_weights;
    attention_layers += layer.attention;
    scan_flops_per_token += layer.scan;
  }
  const double tokens = static_cast<double>(b.micro_batch_size * b.num_microbatches) * S;
  return StepFlops{.matmul = 6.0 * matmul_params * tokens,
                   .attention = 12.0 * attention_layers * S * H * tokens,
                   .scan = scan_flops_per_token * tokens};
}

double training_flops_per_step(const model::ModelSpec& m, const model::BatchSpec& b) {
  return training_flops_by_kind(m, b).total();
}

double peak_bf16_tflops(const std::string& device_name) {
  if (device_name.find("H200") != std::string::npos) return 989.0;
  if (device_name.find("H100") != std::string::npos) return 989.0;
  if (device_name.find("A100") != std::string::npos) return 312.0;
  return 0.0;
}

namespace {
// Whether the file exists, is not empty and its last byte is not a newline: a record cut before its end (a full
// disk, a crash) that whole records appended after it would otherwise join on one line.
bool ends_inside_a_line(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || in.tellg() <= 0) return false;
  in.seekg(-1, std::ios::end);
  return in.get() != '\n';
}
}  // namespace

MetricsLog::MetricsLog(const std::string& path, bool append) : path_(path) {
  const bool terminate = append && ends_inside_a_line(path);
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (file_ == nullptr) {
    throw Error(strprintf("cannot open metrics file %s: %s; choose a writable --run-dir", path.c_str(),
                          std::strerror(errno)));
  }
  // The cut record keeps its own line (a reader drops it as unreadable, or reads it when only the newline was lost).
  if (terminate && (std::fputc('\n', file_) == EOF || std::fflush(file_) != 0)) {
    throw Error(strprintf("cannot write metrics file %s: %s", path.c_str(), std::strerror(errno)));
  }
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

namespace {
// JSON has no NaN or infinity: a non-finite value (NaN checks off) is written as null.
std::string json_number(double v) { return std::isfinite(v) ? strprintf("%.9g", v) : std::string("null"); }

// ', "moe_tokens_per_expert": [[...], ...]' (one row per MoE layer), or nothing.
std::string moe_tokens_json(const std::vector<std::vector<int32_t>>& rows) {
  if (rows.empty()) return "";
  std::string s = ", \"moe_tokens_per_expert\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    s += i ? ", [" : "[";
    for (size_t e = 0; e < rows[i].size(); ++e) s += (e ? ", " : "") + std::to_string(rows[i][e]);
    s += "]";
  }
  return s + "]";
}
}  // namespace

void MetricsLog::write(const StepMetrics& m) {
  errno = 0;
  const int printed = std::fprintf(file_,
               "{\"step\": %lld, \"loss\": %s, \"grad_norm\": %s, \"lr\": %s, \"step_ms\": %.4f, "
               "\"tokens_per_s\": %.1f, \"tflops_per_gpu\": %.3f, \"mfu\": %.5f, \"device_memory_used\": %llu, "
               "\"wall_time_s\": %.3f, \"tokens\": %lld%s%s}\n",
               static_cast<long long>(m.step), json_number(m.loss).c_str(), json_number(m.grad_norm).c_str(),
               json_number(m.lr).c_str(), m.step_ms, m.tokens_per_s, m.tflops_per_gpu, m.mfu,
               static_cast<unsigned long long>(m.device_memory_used), m.wall_time_s,
               static_cast<long long>(m.tokens), m.capture ? ", \"capture\": true" : "",
               m.moe ? (strprintf(", \"moe_aux_loss\": %s, \"moe_z_loss\": %s", json_number(m.aux_loss).c_str(),
                                  json_number(m.z_loss).c_str()) +
                        moe_tokens_json(m.moe_tokens))
                           .c_str()
                     : "");
  check_written(printed, m.step);
}

EvalMetrics eval_metrics(int64_t step, const EvalResult& result, bool test, double wall_time_s, int64_t tokens) {
  return EvalMetrics{.step = step,
                     .test = test,
                     .set = "",  // the caller names a validation set
                     .val_loss = result.loss,
                     .val_ppl = std::exp(result.loss),
                     .batches = result.batches,
                     .ms = result.ms,
                     .wall_time_s = wall_time_s,
                     .tokens = tokens};
}

void MetricsLog::write(const EvalMetrics& m) {
  errno = 0;
  const int printed =
      std::fprintf(file_,
                   "{\"step\": %lld, \"%s_loss\": %s, \"%s_ppl\": %s, \"eval_batches\": %lld, \"eval_ms\": %.1f, "
                   "\"wall_time_s\": %.3f, \"tokens\": %lld%s}\n",
                   static_cast<long long>(m.step), m.test ? "test" : "val", json_number(m.val_loss).c_str(),
                   m.test ? "test" : "val", json_number(m.val_ppl).c_str(), static_cast<long long>(m.batches), m.ms,
                   m.wall_time_s, static_cast<long long>(m.tokens),
                   // A set's name is letters, digits, '.', '_' and '-' (config/validation_sets.h): no escaping.
                   m.set.empty() ? "" : (", \"val_set\": \"" + m.set + "\"").c_str());
  check_written(printed, m.step);
}

void MetricsLog::check_written(int printed, int64_t step) {
  if (printed < 0 || std::fflush(file_) != 0 || std::ferror(file_)) {
    const int err = errno;
    throw Error(strprintf("cannot write metrics file %s at step %lld: %s%s", path_.c_str(),
                          static_cast<long long>(step), err ? std::strerror(err) : "write error",
                          err == ENOSPC ? " (the disk is full)" : ""));
  }
}

MetricsTruncation truncate_metrics_after(const std::string& path, int64_t step) {
  MetricsTruncation result;
  std::ifstream in(path, std::ios::binary);
  if (!in) return result;
  // The kept lines stream into the replacement, a buffer at a time: the file grows by a line a step (~270 bytes:
  // 2.7 GB at 10M steps), so holding it whole would take that much host memory at a resume.
  constexpr size_t kBufferBytes = size_t{4} << 20;
  // Durably (fsync of the file, then of its folder): after a crash the file holds the kept records or all of them,
  // never none. Nothing dropped: the file stays as it is.
  checkpoint::replace_file_atomically(path, [&](checkpoint::DurableFileWriter& out) {
    std::string kept, line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      int64_t line_step = -1;
      try {
        const nlohmann::json j = nlohmann::json::parse(line);
        if (j.is_object() && j.contains("step") && j["step"].is_number_integer()) line_step = j["step"].get<int64_t>();
      } catch (const nlohmann::json::exception&) {
        // a line written only in part (a crash, a full disk): dropped; train/run_folder.h's cut_records_after,
        // which calls this, counts such lines apart from the records of later steps and says which it dropped
      }
      if (line_step >= 0 && line_step <= step) {
        kept += line;
        kept += '\n';
        ++result.kept;
        if (kept.size() >= kBufferBytes) {
          out.write(kept.data(), kept.size());
          kept.clear();
        }
      } else {
        ++result.dropped;
      }
    }
    out.write(kept.data(), kept.size());
    return result.dropped > 0;
  });
  return result;
}

}  // namespace sg::train

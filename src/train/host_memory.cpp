#include "train/host_memory.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <stdexcept>

#include "core/error.h"
#include "core/strings.h"
#include "model/flat_view.h"
#include "model/layer_registry.h"
#include "model/stack.h"

namespace sg::train {

double HostMemoryPlan::per_rank() const {
  double t = 0.0;
  for (const auto& i : items) t += i.bytes;
  return t;
}

double HostMemoryPlan::every_rank() const {
  double t = 0.0;
  for (const auto& i : items) t += i.writer_only ? 0.0 : i.bytes;
  return t;
}

double HostMemoryPlan::total() const {
  return every_rank() * static_cast<double>(std::max(ranks_on_node, 1)) + (per_rank() - every_rank());
}

std::string HostMemoryPlan::describe() const {
  std::vector<std::string> parts;
  for (const auto& i : items) {
    parts.push_back(i.what + " " + bytes_text(i.bytes) +
                    (i.writer_only && (ranks_on_node > 1 || !writes_checkpoints)
                         ? " (the rank that writes checkpoints only)"
                         : ""));
  }
  return join(parts, ", ");
}

HostMemoryPlan plan_host_memory(const model::ModelSpec& m, const model::BatchSpec& b,
                                const HostMemoryOptions& options) {
  HostMemoryPlan plan;
  plan.ranks_on_node = std::max(options.ranks_on_node, 1);
  plan.ranks_source = options.ranks_source;
  plan.cpu_backend = options.cpu_backend;
  plan.writes_checkpoints = options.writes_checkpoints;
  const double f32 = 4.0;
  const double tokens_per_step =
      static_cast<double>(b.micro_batch_size) * static_cast<double>(b.num_microbatches) * static_cast<double>(m.seq_length);
  // tokens + targets (int32) and the loss mask (fp32); the GPU backend's pinned copies are two more.
  plan.items.push_back({"input batch", tokens_per_step * 12.0 * (options.cpu_backend ? 1.0 : 3.0),
                        "train.global_batch_size, model.seq_length"});

  const double H = static_cast<double>(m.hidden_size), V = static_cast<double>(m.vocab_size);
  const double QKV = static_cast<double>(m.qkv_dim()), S = static_cast<double>(m.seq_length);
  const double T = static_cast<double>(b.micro_batch_size) * S;  // tokens per microbatch
  // Each layer as its kind's CPU twin declares it (model/layer.h), counted without building the model (a
  // config may ask for far more than fits); its pre-norm is the step's.
  model::CpuLayerFootprint layers;
  double N = 0.0;
  for (const model::LayerKind kind : model::stack_layer_kinds(m)) {
    const model::CpuLayerFootprint c = model::layer_kind_host_footprint(kind, m, b);
    layers.params += H + c.params;
    layers.saved += c.saved;
    layers.scratch += c.scratch;
    N += 1.0;
  }
  const double P = V * H * (m.share_embeddings_and_output_weights ? 1.0 : 2.0) + layers.params + H;
  const std::string param_keys = "model.num_layers, model.hidden_size, model.ffn_hidden_size, model.vocab_size";
  // The checkpoint items of options (host_memory.h): none holds a copy of the whole state on every rank.
  std::vector<HostMemoryItem> checkpoint_items;
  if (options.checkpoint_load && !options.cpu_backend) {
    checkpoint_items.push_back({"checkpoint upload buffers", static_cast<double>(model::kUploadChunkBytes), ""});
  }
  if (options.checkpoint_save) {
    checkpoint_items.push_back({"checkpoint copy of the state", 14.0 * P, param_keys, /*writer_only=*/true});
  }
  if (!options.cpu_backend) {
    plan.items.insert(plan.items.end(), checkpoint_items.begin(), checkpoint_items.end());
    return plan;
  }
  plan.items.push_back({strprintf("weights, gradients and Adam moments (fp32, %.3g parameters)", P), 16.0 * P,
                        param_keys});
  // The residual stream, its pre-norm output and rstd at the N + 1 layer boundaries (model/cpu_model.h),
  // and each layer's own saved activations.
  plan.items.push_back({"activations of one microbatch", ((N + 1.0) * T * (2.0 * H + 1.0) + layers.saved) * f32,
                        "model.num_layers, train.micro_batch_size, model.seq_length, model.hidden_size"});
  // Scratch: the model's 5 [T,H] buffers, each layer twin's gradient scratch, the LM-head chunk's
  // logits and dlogits (128 rows), the attention backward's fp64 rows.
  const double scratch = (5.0 * T * H + layers.scratch) * f32 + 2.0 * std::min(T, 128.0) * V * f32 + S * QKV * 8.0;
  plan.items.push_back({"scratch", scratch, "train.micro_batch_size, model.seq_length, model.vocab_size"});
  // The initial weights are built before they are copied in.
  plan.items.push_back({"initial weights", P * f32, param_keys});
  plan.items.insert(plan.items.end(), checkpoint_items.begin(), checkpoint_items.end());
  return plan;
}

void check_host_memory(const HostMemoryPlan& plan, const AvailableHostMemory& available) {
  // A per-process limit holds this rank only (without the writer's items on a rank that does not write checkpoints:
  // its limit may be lower); a shared one every rank on the node.
  const bool shared = !available.per_process && plan.ranks_on_node > 1;
  const double own = plan.writes_checkpoints ? plan.per_rank() : plan.every_rank();
  const double need = shared ? plan.total() : own;
  if (available.source.empty() || need <= available.bytes) return;
  const auto largest = std::max_element(plan.items.begin(), plan.items.end(),
                                        [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
  // The rank that writes checkpoints holds its own copy of the state on top, unless every rank does.
  const double writer_only = plan.per_rank() - plan.every_rank();
  const std::string writer_text =
      writer_only > 0.0 ? " + " + bytes_text(writer_only) + " on the rank that writes checkpoints" : "";
  const std::string needs =
      shared
          ? strprintf("%s of host memory on this node: %d ranks (%s) x %s per rank%s (%s)", bytes_text(need).c_str(),
                      plan.ranks_on_node, plan.ranks_source.empty() ? "ranks on this node" : plan.ranks_source.c_str(),
                      bytes_text(plan.every_rank()).c_str(), writer_text.c_str(), plan.describe().c_str())
          : strprintf(
                "%s of host memory%s (%s)", bytes_text(need).c_str(),
                plan.writes_checkpoints || plan.per_rank() == own ? "" : " on this rank, which writes no checkpoints",
                plan.describe().c_str());
  std::string fixes = largest->keys.empty() ? "free host memory" : "lower " + largest->keys;  // "": a fixed size
  if (shared) {
    fixes +=
        ", or start fewer ranks on this node (torchrun --nproc-per-node, stepgraph launch -n, srun "
        "--ntasks-per-node)";
  }
  if (plan.cpu_backend) fixes += ", or train on a GPU";
  throw Error(
      strprintf("the run needs about %s, but only %s is available (%s). Nothing was allocated. "
                "The largest part is the %s: %s",
                needs.c_str(), bytes_text(available.bytes).c_str(), available.source.c_str(), largest->what.c_str(),
                fixes.c_str()));
}

void check_host_memory(const HostMemoryPlan& plan, const std::vector<AvailableHostMemory>& limits) {
  for (const AvailableHostMemory& limit : limits) check_host_memory(plan, limit);
}

void with_host_allocation(const std::string& what, const std::function<void()>& allocate) {
  try {
    allocate();
  } catch (const std::bad_alloc&) {
    throw Error(strprintf("out of host memory while allocating %s (std::bad_alloc); the memory plan "
                          "underestimated it or other processes took the memory. Use a smaller model or batch",
                          what.c_str()));
  } catch (const std::length_error&) {
    throw Error(strprintf("cannot allocate %s: the size exceeds what one host buffer can hold "
                          "(std::length_error). Use a smaller model or batch",
                          what.c_str()));
  }
}

}  // namespace sg::train

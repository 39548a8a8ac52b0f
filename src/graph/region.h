#pragma once
// Regions: the named pieces of a training step (layer x module x phase). The step is written once as
// launches on one stream; it wraps each module's launches in RegionRunner::run, and the runner decides
// whether they run eagerly, are captured into a graph, or are replaced by a graph replay.
//
// Contract for a region body (what makes it graphable):
//   * it only enqueues device work on the given stream (no host sync, no allocation, no D2H read);
//   * every pointer and every scalar it passes is the same on every call (static arena addresses);
//     anything that changes between calls (microbatch, step, lr, rng offset) is read from device memory.
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>

#include "cuda/nvtx.h"

namespace sg::graph {

enum class Module : uint8_t { attn, mlp, moe, moe_router, moe_preprocess, mamba };
enum class Phase : uint8_t { forward, backward };

const char* module_name(Module module);  // "attn", "mlp", ...; the module scopes' names too (scope_plan.h)
const char* phase_name(Phase phase);     // "forward", "backward"

struct RegionKey {
  int layer = 0;
  Module module = Module::attn;
  Phase phase = Phase::forward;
  // Backward of the step's first microbatch: its launches overwrite the gradients that later
  // microbatches add to (model/gradient_zeroing.h), so it is a region of its own, captured apart from
  // the backward the other microbatches replay. A scope plan lists only the plain key; graphing it
  // graphs both.
  bool first_microbatch = false;
  bool operator==(const RegionKey&) const = default;
  RegionKey plain() const { return {layer, module, phase}; }  // without first_microbatch
};

std::string region_name(const RegionKey& key);  // "layer 3 attn forward", "layer 3 attn backward first"

using RegionBody = std::function<void(cudaStream_t)>;

class RegionRunner {
 public:
  virtual ~RegionRunner() = default;
  // Runs (or captures, or replays) the region's launches on `stream`.
  virtual void run(const RegionKey& key, cudaStream_t stream, const RegionBody& body) = 0;
};

// Runs every region eagerly: impl none, warmup steps, and whole-step capture (where the enclosing
// capture records the launches). The NVTX range gives Nsight Systems the layer/module structure.
class EagerRegionRunner final : public RegionRunner {
 public:
  void run(const RegionKey& key, cudaStream_t stream, const RegionBody& body) override {
    const cuda::NvtxRange range(region_name(key));
    body(stream);
  }
};

}  // namespace sg::graph

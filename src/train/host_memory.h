#pragma once
// Host memory before allocating it. The CPU backend holds the whole model in host memory (fp32
// weights, gradients, Adam moments and one microbatch's activations per layer), so a config that
// does not fit would grow until the kernel's OOM killer ends it, or fail with a bare
// std::bad_alloc. The trainer plans the bytes first (as the GPU backend plans device memory),
// compares them with what the machine and its limits allow, and refuses a plan that does not fit,
// naming the numbers and the keys that change them.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/available_memory.h"
#include "model/spec.h"

namespace sg::train {

struct HostMemoryItem {
  std::string what;              // "weights, gradients and Adam moments (fp32)"
  double bytes = 0.0;            // double: absurd configs must not overflow the arithmetic
  std::string keys;              // the keys that size it: "model.num_layers, model.hidden_size, ..."; "": none
  bool writer_only = false;      // held by the rank that writes checkpoints only, not by every rank
};

struct HostMemoryPlan {
  std::vector<HostMemoryItem> items;  // what one process (one rank) holds; the rank that writes checkpoints, the most
  // The processes on this node that hold the items each, at the same time: the data-parallel ranks. A writer_only
  // item counts once: at most one rank of a node writes (rank 0's node; another node holds none, planned alike).
  int ranks_on_node = 1;
  std::string ranks_source;  // where the count came from: "LOCAL_WORLD_SIZE = 8"
  bool cpu_backend = true;
  // Whether this process writes checkpoints: a per-process limit (an rlimit) holds its own need, per_rank() or, on a
  // rank that does not write, every_rank().
  bool writes_checkpoints = true;
  double per_rank() const;       // the items' sum: what the rank that writes checkpoints needs (another, no more)
  double every_rank() const;     // the sum of the items every rank holds (not writer_only)
  double total() const;          // every_rank() x ranks_on_node + the writer_only items: what the node needs
  std::string describe() const;  // "a 1.2 GiB, b 30 MiB, ..."
};

struct HostMemoryOptions {
  bool cpu_backend = true;        // the model lives in host memory
  // A save downloads the state to the host (fp32 weights and both moments, and a bf16 copy of the weights: 14 bytes
  // a parameter) on the rank that writes checkpoints alone: with the distributed optimizer the others join the
  // gathers without a copy (TrainingBackend::join_state_gather).
  bool checkpoint_save = false;
  // A resume or a pretrained start: every rank's backend reads the mapped checkpoint or weight files (file-backed page
  // cache, shared by the node's ranks and evictable, so not planned) through its upload buffers (GPU:
  // model::kUploadChunkBytes; the CPU backend reads straight into its own buffers).
  bool checkpoint_load = false;
  int ranks_on_node = 1;            // dist::WorldInfo::ranks_on_node() of a data-parallel run
  std::string ranks_source{};       // e.g. "LOCAL_WORLD_SIZE = 8", named by the error
  bool writes_checkpoints = true;   // this process is the rank that writes checkpoints (DistributedRun::is_writer)
};

// What one rank needs on the host: the input batches, and with the CPU backend the model, its
// optimizer state, activations and scratch; plus, with either backend, what options say of checkpoints: the copy a
// save downloads (on the rank that writes checkpoints only) and the upload buffers of a resume or a pretrained start.
// The items are summed although a start's and a save's memory are never held at once: the plan errs on the safe
// side.
HostMemoryPlan plan_host_memory(const model::ModelSpec& model, const model::BatchSpec& batch,
                                const HostMemoryOptions& options);

// sg::Error when the plan does not fit `available`: both totals, every item, and the keys of the
// largest item to change. A limit the node's processes share (MemAvailable, a cgroup) must hold every rank's
// plan (total(); the error names the rank count, the per-rank need and the writing rank's own), a per-process one
// (an rlimit) this process's own (per_rank() on the rank that writes checkpoints, every_rank() on another).
void check_host_memory(const HostMemoryPlan& plan, const AvailableHostMemory& available);
// Each of them (core/available_memory.h's host_memory_limits()).
void check_host_memory(const HostMemoryPlan& plan, const std::vector<AvailableHostMemory>& limits);

// Runs `allocate` and turns an allocation failure (std::bad_alloc, std::length_error) into an
// sg::Error naming `what` was being allocated and how much memory the plan expected.
void with_host_allocation(const std::string& what, const std::function<void()>& allocate);

}  // namespace sg::train

#pragma once
// Named, independent, graph-safe random generators — the counterpart of TransformerEngine's
// CudaRNGStatesTracker / Megatron's RNG tracker, built on counter-based Philox4x32-10 (core/philox.h).
//
// Each generator is an RngState {seed, offset} living in DEVICE memory. A kernel that draws receives
// a pointer to the state (current()) and a plan-time call-site number, never host scalars; so an eager
// step and a replayed graph read the same state and draw the same numbers. The offset advances on
// the device (launch_advance, once per microbatch, capturable), never through the host.
//
// Fork semantics (as TE's tracker.fork(name)): while a Fork for "model-parallel-rng" is alive,
// current() returns that generator's state, so code written against current() draws from it;
// when the Fork ends, the previous generator is current again. Forks nest. Forking is plan-time
// bookkeeping: it only changes which (static) device pointer the launcher receives.
//
// RngTracker keeps a host copy of the states. It is the CPU mirror of the generator: uniform()/bits()
// on the host give bit-identical numbers to philox_uniform on the device for the same state, and
// advance_host() does on the host what launch_advance does on the device. Host and device copies are
// synchronised explicitly (upload / download): replays advance only the device copy.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/philox.h"
#include "cuda/arena.h"

namespace sg::cuda {

using rng::RngState;

inline constexpr const char* kDefaultRng = "default";
inline constexpr const char* kModelParallelRng = "model-parallel-rng";
// Megatron's model_parallel_cuda_manual_seed seeds the tensor-parallel generator with seed + 2718
// (+ tp_rank); we keep the constant so configs reproduce the same derivation.
inline constexpr uint64_t kModelParallelSeedOffset = 2718;

struct GeneratorSpec {
  std::string name;
  uint64_t seed = 0;
};

class RngTracker {
 public:
  // Generators "default" (seed) and "model-parallel-rng" (seed + 2718), all offsets 0.
  explicit RngTracker(uint64_t seed);
  // Explicit list (unique, non-empty names); the first one is current when no fork is active.
  explicit RngTracker(std::vector<GeneratorSpec> generators);
  ~RngTracker();
  RngTracker(const RngTracker&) = delete;
  RngTracker& operator=(const RngTracker&) = delete;

  // ---- generators (plan time) ----
  size_t size() const { return names_.size(); }
  const std::string& name(size_t index) const { return names_.at(index); }
  // Index of a generator; throws sg::Error naming the unknown name and the closest known one.
  size_t index(const std::string& name) const;

  // ---- fork ----
  class Fork {
   public:
    Fork(Fork&& other) noexcept : tracker_(other.tracker_) { other.tracker_ = nullptr; }
    Fork(const Fork&) = delete;
    Fork& operator=(const Fork&) = delete;
    Fork& operator=(Fork&&) = delete;
    ~Fork();

   private:
    friend class RngTracker;
    explicit Fork(RngTracker* tracker) : tracker_(tracker) {}
    RngTracker* tracker_;
  };
  // Until the returned Fork is destroyed, `name` is the current generator. Forks must end in LIFO
  // order (they are scoped objects).
  [[nodiscard]] Fork fork(const std::string& name = kModelParallelRng);
  size_t current_index() const { return fork_stack_.empty() ? 0 : fork_stack_.back(); }
  const std::string& current_name() const { return names_[current_index()]; }

  // ---- device copy ----
  // Device memory for the states: plan it in the arena (preferred) and bind(), or let the tracker
  // allocate its own (allocate_device()). Either uploads the host copy (setup time, synchronous).
  size_t device_bytes() const { return names_.size() * sizeof(RngState); }
  MemorySlot plan(MemoryPlan& plan, const std::string& name = "rng.states") const;
  void bind(RngState* device_states);
  void allocate_device();
  bool has_device() const { return device_ != nullptr; }
  // Every state on the device (size() of them), for a kernel that advances them itself.
  RngState* device_states() const { return device_; }

  // Device pointer of the current generator's state (what a drawing launcher receives).
  const RngState* current() const { return device_state(current_index()); }
  const RngState* device_state(size_t index) const;
  const RngState* device_state(const std::string& name) const { return device_state(index(name)); }

  // Enqueues the device-side advance: every generator's offset += `by`. One tiny kernel, no host
  // scalars that change between steps (`by` is a plan-time constant), capturable.
  void launch_advance(cudaStream_t stream, uint64_t by = 1) const;

  // Host copy -> device (synchronous; setup / restore time only) and device -> host copy.
  void upload();
  void download();

  // ---- host copy: the CPU mirror ----
  const RngState& host_state(size_t index) const { return host_.at(index); }
  RngState& host_state(size_t index) { return host_.at(index); }
  void advance_host(uint64_t by = 1);  // what launch_advance does, on the host copy
  // Same numbers as philox_uniform/philox_bits on the device for the host copy's state.
  float uniform(size_t generator, uint32_t site, uint64_t index) const;
  uint32_t bits(size_t generator, uint32_t site, uint64_t index) const;

  // ---- checkpoints ----
  // Bytes of every generator (name, seed, offset), little-endian, versioned. save() reads the
  // device copy first when there is one (so it is a host synchronisation: call it between steps).
  std::vector<uint8_t> save();
  // Restores states by name (every generator of this tracker must be present; extra ones in the
  // bytes are an error too, so a config change is noticed). Uploads when there is a device copy.
  void restore(const std::vector<uint8_t>& bytes);
  // Pure serialisation of the host copy (save/restore without touching the device).
  std::vector<uint8_t> serialize_host() const;
  void deserialize_host(const std::vector<uint8_t>& bytes);

 private:
  void pop_fork() noexcept;

  std::vector<std::string> names_;
  std::vector<RngState> host_;
  std::vector<size_t> fork_stack_;
  RngState* device_ = nullptr;
  bool owns_device_ = false;
};

// The device-side advance, declared for the tracker (defined in rng_tracker.cu).
void launch_rng_advance(RngState* states, size_t count, uint64_t by, cudaStream_t stream);

}  // namespace sg::cuda

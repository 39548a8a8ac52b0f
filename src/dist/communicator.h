#pragma once
// One NCCL communicator over the data-parallel ranks, on the current device, and the collectives the
// training step uses — all enqueued on a stream given by the caller, so inside a step they run eagerly
// or are captured into the step's graph like any kernel (NCCL supports stream capture).
//
// Teardown order (graph/registry.h): every live graph is destroyed BEFORE the communicator, on every
// way out — the destructor calls graph::destroy_all_live_graphs() first, and an at-exit release runs
// after the registries' at-exit cleanup if the process exits with the communicator alive.
//   finish()   normal end, the streams idle: ncclCommDestroy
//   otherwise  (exception, a failed peer, a device error, exit): ncclCommAbort, which never waits for other
//              ranks
//
// NCCL_GRAPH_REGISTER (docs/distributed.md): NCCL registers the buffers of collectives captured in a
// graph. Megatron must turn that off (NCCL_GRAPH_REGISTER=0) when PyTorch's allocator uses expandable
// segments, because buffers in remappable cuMem segments break the registration on pre-Blackwell GPUs.
// Every buffer a stepgraph collective touches lies in the step's arena — one cudaMalloc, never remapped
// — so stepgraph keeps NCCL's default; graph_register_decision() applies Megatron's rule should a
// collective ever touch expandable memory.
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

struct ncclComm;

namespace sg::dist {

using NcclUniqueIdBytes = std::array<char, 128>;  // ncclUniqueId, as bytes for the rendezvous store

// ncclGetUniqueId on this process (rank 0); needs no GPU.
NcclUniqueIdBytes new_nccl_unique_id();

enum class ElementType : uint8_t { f32, f64, bf16, i32 };

class Communicator {
 public:
  // Every rank calls this with the same id and world size; blocks until all have (NCCL's bootstrap).
  Communicator(const NcclUniqueIdBytes& id, int world_size, int rank);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int device() const { return device_; }
  // "NCCL 2.28.3 (/usr/lib/.../libnccl.so.2), rank 0 of 2 on GPU 0"
  std::string describe() const;

  // In place is allowed wherever NCCL allows it (all_reduce: send == recv; reduce_scatter: recv ==
  // send + rank * count; all_gather: send == recv + rank * count). `count` is per rank for the last two.
  void all_reduce_sum(const void* send, void* recv, size_t count, ElementType type, cudaStream_t stream);
  void reduce_scatter_sum(const void* send, void* recv, size_t count, ElementType type, cudaStream_t stream);
  // The sum over ranks into rank `root`'s `recv` (in place: send == recv; other ranks' recv is untouched).
  void reduce_sum(const void* send, void* recv, size_t count, ElementType type, int root, cudaStream_t stream);
  void all_gather(const void* send, void* recv, size_t count, ElementType type, cudaStream_t stream);

  // Throws sg::Error when NCCL reported an asynchronous error (a peer died, a network failure).
  void check_async_error();
  // The run ended normally and the device is idle: the destructor may ncclCommDestroy.
  void mark_finished() { finished_ = true; }

 private:
  void release(bool destroy) noexcept;

  ncclComm* comm_ = nullptr;
  int rank_ = 0;
  int world_size_ = 1;
  int device_ = 0;
  bool finished_ = false;
  int exit_release_ = 0;  // graph/registry.h handle
};

// Megatron's NCCL_GRAPH_REGISTER rule, as a pure decision (tests/dist/nccl_library_test.cpp):
// collectives captured in graphs + memory from expandable segments + a pre-Blackwell GPU (compute
// capability < 10) need NCCL_GRAPH_REGISTER=0. Unset -> set it to 0 (set_zero); set to anything else ->
// an error naming both variables; every other case -> leave NCCL's default.
struct GraphRegisterDecision {
  bool set_zero = false;
  std::string error;  // non-empty: refuse to start
  std::string note;   // one line for the log
};
GraphRegisterDecision graph_register_decision(bool graphs_capture_collectives, bool expandable_memory,
                                              int compute_capability_major,
                                              const std::optional<std::string>& nccl_graph_register);

}  // namespace sg::dist

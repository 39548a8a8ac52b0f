#include "dist/communicator.h"

#include <cstdio>
#include <cstring>
#include <exception>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "dist/nccl_api.h"
#include "graph/registry.h"

namespace sg::dist {
namespace {

ncclDataType_t nccl_type(ElementType t) {
  switch (t) {
    case ElementType::f32: return ncclFloat32;
    case ElementType::f64: return ncclFloat64;
    case ElementType::bf16: return ncclBfloat16;
    case ElementType::i32: return ncclInt32;
  }
  return ncclFloat32;
}

// On a noexcept path (the destructor, the at-exit release): check_nccl's message, logged instead of thrown. No
// communicator for ncclGetLastError: the call may have freed it.
void log_nccl_error(ncclResult_t result, const char* call, const char* file, int line) noexcept {
  try {
    check_nccl(result, call);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s [%s:%d]\n", e.what(), file, line);  // log::error's format, no allocation
  }
}

}  // namespace

#define SG_NCCL_CHECK_NOEXCEPT(call, name) log_nccl_error((call), name, __FILE__, __LINE__)

NcclUniqueIdBytes new_nccl_unique_id() {
  ncclUniqueId id;
  check_nccl(nccl().GetUniqueId(&id), "ncclGetUniqueId");
  static_assert(sizeof(id) == sizeof(NcclUniqueIdBytes));
  NcclUniqueIdBytes out;
  std::memcpy(out.data(), &id, sizeof(id));
  return out;
}

Communicator::Communicator(const NcclUniqueIdBytes& id, int world_size, int rank)
    : rank_(rank), world_size_(world_size) {
  SG_CHECK(world_size >= 1 && rank >= 0 && rank < world_size,
           strprintf("NCCL communicator: rank %d of world size %d", rank, world_size));
  SG_CUDA_CHECK(cudaGetDevice(&device_));
  ncclUniqueId nccl_id;
  std::memcpy(&nccl_id, id.data(), sizeof(nccl_id));
  ncclComm_t comm = nullptr;
  check_nccl(nccl().CommInitRank(&comm, world_size, nccl_id, rank),
             strprintf("ncclCommInitRank (rank %d of %d, GPU %d)", rank, world_size, device_).c_str());
  comm_ = comm;
  // If the process exits with the communicator alive, abort it after the graphs are gone.
  exit_release_ = graph::release_after_graphs_at_exit([this] { release(false); });
}

Communicator::~Communicator() {
  graph::cancel_release_after_graphs(exit_release_);
  release(finished_);
}

void Communicator::release(bool destroy) noexcept {
  if (comm_ == nullptr) return;
  // Graphs first: a captured collective holds references into this communicator.
  graph::destroy_all_live_graphs();
  if (destroy) {
    // Normal end: let the device finish (graph executables are freed once idle), then destroy. A device that
    // reports an error has not ended normally: abort instead, which never waits for the other ranks.
    if (const cudaError_t err = cudaDeviceSynchronize(); err != cudaSuccess) {
      cuda::log_cuda_error(err, "cudaDeviceSynchronize", __FILE__, __LINE__);
      destroy = false;
    }
  }
  if (destroy) {
    SG_NCCL_CHECK_NOEXCEPT(nccl().CommDestroy(comm_), "ncclCommDestroy");
  } else {
    SG_NCCL_CHECK_NOEXCEPT(nccl().CommAbort(comm_), "ncclCommAbort");
  }
  comm_ = nullptr;
}

std::string Communicator::describe() const {
  const NcclLibraryInfo& lib = load_nccl();
  return strprintf("NCCL %s (%s), rank %d of %d on GPU %d", lib.version().c_str(), lib.path.c_str(), rank_,
                   world_size_, device_);
}

void Communicator::all_reduce_sum(const void* send, void* recv, size_t count, ElementType type, cudaStream_t stream) {
  check_nccl(nccl().AllReduce(send, recv, count, nccl_type(type), ncclSum, comm_, stream), "ncclAllReduce", comm_);
}

void Communicator::reduce_scatter_sum(const void* send, void* recv, size_t count, ElementType type,
                                      cudaStream_t stream) {
  check_nccl(nccl().ReduceScatter(send, recv, count, nccl_type(type), ncclSum, comm_, stream), "ncclReduceScatter",
             comm_);
}

void Communicator::reduce_sum(const void* send, void* recv, size_t count, ElementType type, int root,
                              cudaStream_t stream) {
  check_nccl(nccl().Reduce(send, recv, count, nccl_type(type), ncclSum, root, comm_, stream), "ncclReduce", comm_);
}

void Communicator::all_gather(const void* send, void* recv, size_t count, ElementType type, cudaStream_t stream) {
  check_nccl(nccl().AllGather(send, recv, count, nccl_type(type), comm_, stream), "ncclAllGather", comm_);
}

void Communicator::check_async_error() {
  ncclResult_t async = ncclSuccess;
  check_nccl(nccl().CommGetAsyncError(comm_, &async), "ncclCommGetAsyncError", comm_);
  check_nccl(async, "an NCCL collective (asynchronous error)", comm_);
}

GraphRegisterDecision graph_register_decision(bool graphs_capture_collectives, bool expandable_memory,
                                              int compute_capability_major,
                                              const std::optional<std::string>& nccl_graph_register) {
  GraphRegisterDecision d;
  if (!graphs_capture_collectives) {
    d.note = "NCCL_GRAPH_REGISTER: no collective is captured in a graph; NCCL's default kept";
    return d;
  }
  if (!expandable_memory) {
    d.note = "NCCL_GRAPH_REGISTER: collectives are captured, their buffers are one fixed cudaMalloc arena (no "
             "expandable segments): NCCL's graph registration is safe and kept" +
             (nccl_graph_register ? std::string(" (set to ") + *nccl_graph_register + " by the environment)"
                                  : std::string());
    return d;
  }
  if (compute_capability_major >= 10) {
    d.note = "NCCL_GRAPH_REGISTER: expandable memory on a Blackwell or newer GPU: registration kept";
    return d;
  }
  if (!nccl_graph_register) {
    d.set_zero = true;
    d.note = "NCCL_GRAPH_REGISTER=0: collectives in graphs over expandable-segment memory on a pre-Blackwell GPU "
             "(as Megatron requires, to avoid illegal memory accesses)";
  } else if (trim(*nccl_graph_register) != "0") {
    d.error = "NCCL_GRAPH_REGISTER=" + *nccl_graph_register +
              " with collectives captured in CUDA graphs over expandable-segment memory on a pre-Blackwell GPU "
              "causes illegal memory accesses (Megatron refuses it too): set NCCL_GRAPH_REGISTER=0, or turn "
              "expandable segments off";
  } else {
    d.note = "NCCL_GRAPH_REGISTER=0 (from the environment)";
  }
  return d;
}

}  // namespace sg::dist

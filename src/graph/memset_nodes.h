#pragma once
// Memset nodes of a captured graph become kernel nodes that write the same bytes.
//
// Why: inside a replayed graph, kernel -> kernel transitions cost ~0.1 us on the H200, but every
// transition into or out of a memset node costs microseconds (the memset runs on a different engine
// path). A training step captures ten of them (zeroing the gradients and per-step scalars, and a 4-byte
// counter cuDNN's SDPA clears before each launch), which was most of the gap between the whole-step
// graph and the kernel-time floor on small models. The library calls cannot be told not to memset,
// so the graph is rewritten after capture: same bytes, same dependencies, one node type.
//
// Large memsets stay memset nodes: from kLargestLoweredMemsetBytes up, the memset path writes faster
// than the fill kernel (H200: 541 MB in 118 us against 132 us) and one transition is under 1% of the
// node. Only top-level nodes are rewritten (stream capture produces no child graphs).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace sg::graph {

// What a memset node writes, in the form the fill kernel takes. Build with memset_fill_job().
struct MemsetFillJob {
  unsigned char* dst = nullptr;
  size_t pitch = 0;          // bytes between row starts (rows > 1)
  size_t row_bytes = 0;      // width * element size
  size_t rows = 1;
  uint32_t word_pattern = 0; // the 4 bytes every 4-byte-aligned word receives
};

// Translates memset node parameters (element size 1, 2 or 4; dst and pitch aligned to it, as the
// driver requires). Throws sg::Error naming the bad field otherwise.
MemsetFillJob memset_fill_job(const cudaMemsetParams& params);

// The byte the job writes at `address` (within its rows): the CPU statement of the fill pattern.
inline unsigned char memset_fill_byte(const MemsetFillJob& job, uintptr_t address) {
  return static_cast<unsigned char>(job.word_pattern >> (8u * (address % 4u)));
}

// Enqueues the fill kernel on `stream` (used by tests and by anyone who wants the kernel eagerly).
void launch_memset_fill(cudaStream_t stream, const MemsetFillJob& job);

inline constexpr size_t kLargestLoweredMemsetBytes = size_t{32} << 20;

// Several one-row memsets in a chain (each the only dependent of the one before, their bytes disjoint) become
// ONE fill kernel: the step starts with three (the gradient ranges no first writer covers, the per-step
// scalars) and CUB's radix sort clears two buffers in a row; every kernel node saved is ~1 us at tiny sizes.
inline constexpr int kMaxMergedMemsets = 8;
struct MemsetFillJobs {
  MemsetFillJob jobs[kMaxMergedMemsets];
  unsigned block_end[kMaxMergedMemsets] = {};  // job k runs on blocks [block_end[k-1], block_end[k])
  int count = 0;
};
// The jobs of `memsets` (one-row memset parameters), with their blocks laid out. Throws sg::Error for more
// than kMaxMergedMemsets, a job of several rows, or two jobs whose bytes overlap.
MemsetFillJobs memset_fill_jobs(const cudaMemsetParams* memsets, int count);
// Enqueues the fill kernel of several jobs on `stream` (used by tests).
void launch_memset_fill_jobs(cudaStream_t stream, const MemsetFillJobs& jobs);

// Replaces every memset node of `graph` smaller than kLargestLoweredMemsetBytes by a fill-kernel node
// with the same incoming and outgoing edges (edge data kept); a chain of such one-row memsets with disjoint
// bytes becomes one node (up to kMaxMergedMemsets), with the chain's first incoming and last outgoing edges.
// Returns how many memset nodes were replaced.
int lower_memset_nodes(cudaGraph_t graph);

}  // namespace sg::graph

// The fill kernel that stands in for memset nodes, and the graph rewrite (see memset_nodes.h for why).
#include "graph/memset_nodes.h"

#include <algorithm>
#include <unordered_set>
#include <vector>

#include "core/strings.h"
#include "cuda/check.h"
#include "graph/graph_edges.h"
#include "graph/graph_exec.h"

namespace sg::graph {

namespace {

constexpr size_t kVectorBytes = sizeof(uint4);
constexpr unsigned kMaxBlocksPerRow = 1024;  // ~8 per SM on an H200: enough to saturate bandwidth
constexpr unsigned kMaxGridRows = 65535;     // gridDim.y limit; more rows loop

// Writes [base, base + n) with the word pattern: a byte-wise head up to 16-byte alignment, 16-byte
// stores for the middle, a byte-wise tail. `t`/`stride` index the threads sharing this row.
__device__ void fill_row(unsigned char* base, size_t n, uint32_t pattern, size_t t, size_t stride) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(base);
  const size_t head = std::min(n, (kVectorBytes - addr % kVectorBytes) % kVectorBytes);
  const size_t vectors = (n - head) / kVectorBytes;
  const size_t tail_start = head + vectors * kVectorBytes;
  const size_t tail = n - tail_start;
  uint4* middle = reinterpret_cast<uint4*>(base + head);
  const uint4 v = make_uint4(pattern, pattern, pattern, pattern);
  for (size_t i = t; i < vectors; i += stride) middle[i] = v;
  if (t < head) base[t] = static_cast<unsigned char>(pattern >> (8u * ((addr + t) % 4u)));
  if (t < tail) {
    const size_t k = tail_start + t;
    base[k] = static_cast<unsigned char>(pattern >> (8u * ((addr + k) % 4u)));
  }
}

__global__ void memset_fill_kernel(MemsetFillJob job) {
  const size_t t = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t row = blockIdx.y; row < job.rows; row += gridDim.y) {
    fill_row(job.dst + row * job.pitch, job.row_bytes, job.word_pattern, t, stride);
  }
}

// Job k of the block's range (block_end is increasing; at most kMaxMergedMemsets jobs).
__global__ void memset_fill_jobs_kernel(MemsetFillJobs jobs) {
  int k = 0;
  while (blockIdx.x >= jobs.block_end[k]) ++k;
  const unsigned first = k == 0 ? 0u : jobs.block_end[k - 1];
  const size_t t = static_cast<size_t>(blockIdx.x - first) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(jobs.block_end[k] - first) * blockDim.x;
  const MemsetFillJob& job = jobs.jobs[k];
  fill_row(job.dst, job.row_bytes, job.word_pattern, t, stride);
}

constexpr unsigned kJobThreads = 256;

struct LaunchShape {
  dim3 grid;
  dim3 block;
};

LaunchShape launch_shape(const MemsetFillJob& job) {
  // Head and tail are at most 15 bytes each, so a row needs at least 16 threads; small rows get one warp.
  const size_t vectors = job.row_bytes / kVectorBytes;
  const unsigned threads = vectors <= 32 ? 32u : 256u;
  const size_t blocks = std::clamp<size_t>((vectors + threads - 1) / threads, 1, kMaxBlocksPerRow);
  const size_t rows = std::clamp<size_t>(job.rows, 1, kMaxGridRows);
  return {dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(rows)), dim3(threads)};
}

uint32_t word_pattern(uint32_t value, unsigned element_size) {
  switch (element_size) {
    case 1: return (value & 0xffu) * 0x01010101u;
    case 2: return (value & 0xffffu) * 0x00010001u;
    default: return value;
  }
}

}  // namespace

MemsetFillJob memset_fill_job(const cudaMemsetParams& params) {
  const unsigned es = params.elementSize;
  SG_CHECK(es == 1 || es == 2 || es == 4,
           strprintf("memset node: elementSize %u (the driver allows 1, 2 or 4)", es));
  SG_CHECK(reinterpret_cast<uintptr_t>(params.dst) % es == 0,
           strprintf("memset node: dst %p is not aligned to its elementSize %u", params.dst, es));
  SG_CHECK(params.height <= 1 || params.pitch % es == 0,
           strprintf("memset node: pitch %zu is not a multiple of its elementSize %u", params.pitch, es));
  SG_CHECK(params.height <= 1 || params.pitch >= params.width * es,
           strprintf("memset node: pitch %zu is smaller than a row (%zu bytes)", params.pitch, params.width * es));
  MemsetFillJob job;
  job.dst = static_cast<unsigned char*>(params.dst);
  job.row_bytes = params.width * es;
  job.rows = params.height;  // 0 rows: nothing to write (the node still orders its neighbours)
  job.pitch = job.rows > 1 ? params.pitch : job.row_bytes;
  job.word_pattern = word_pattern(params.value, es);
  return job;
}

MemsetFillJobs memset_fill_jobs(const cudaMemsetParams* memsets, int count) {
  SG_CHECK(count >= 1 && count <= kMaxMergedMemsets,
           strprintf("memset_fill_jobs: %d memsets (1 to %d)", count, kMaxMergedMemsets));
  MemsetFillJobs jobs;
  unsigned blocks = 0;
  for (int k = 0; k < count; ++k) {
    const MemsetFillJob job = memset_fill_job(memsets[k]);
    SG_CHECK(job.rows == 1, strprintf("memset_fill_jobs: memset %d has %zu rows (only one-row memsets merge)", k,
                                      job.rows));
    const uintptr_t begin = reinterpret_cast<uintptr_t>(job.dst), end = begin + job.row_bytes;
    for (int j = 0; j < k; ++j) {
      const uintptr_t b = reinterpret_cast<uintptr_t>(jobs.jobs[j].dst), e = b + jobs.jobs[j].row_bytes;
      SG_CHECK(end <= b || e <= begin,
               strprintf("memset_fill_jobs: memsets %d and %d overlap (their order would matter)", j, k));
    }
    const size_t vectors = job.row_bytes / kVectorBytes;
    blocks += static_cast<unsigned>(std::clamp<size_t>((vectors + kJobThreads - 1) / kJobThreads, 1, kMaxBlocksPerRow));
    jobs.jobs[k] = job;
    jobs.block_end[k] = blocks;
  }
  jobs.count = count;
  for (int k = count; k < kMaxMergedMemsets; ++k) jobs.block_end[k] = blocks;  // never reached
  return jobs;
}

void launch_memset_fill_jobs(cudaStream_t stream, const MemsetFillJobs& jobs) {
  memset_fill_jobs_kernel<<<jobs.block_end[jobs.count - 1], kJobThreads, 0, stream>>>(jobs);
  SG_CUDA_CHECK_LAUNCH("memset_fill_jobs_kernel");
}

void launch_memset_fill(cudaStream_t stream, const MemsetFillJob& job) {
  if (job.row_bytes == 0 || job.rows == 0) return;
  const LaunchShape shape = launch_shape(job);
  memset_fill_kernel<<<shape.grid, shape.block, 0, stream>>>(job);
  SG_CUDA_CHECK_LAUNCH("memset_fill_kernel");
}

namespace {

// A memset node the rewrite replaces; `params` and `job` filled.
bool lowerable(cudaGraphNode_t node, cudaMemsetParams& params, MemsetFillJob& job) {
  if (node_type(node) != cudaGraphNodeTypeMemset) return false;
  SG_CUDA_CHECK(cudaGraphMemsetNodeGetParams(node, &params));
  job = memset_fill_job(params);
  return job.row_bytes * job.rows < kLargestLoweredMemsetBytes;
}

bool overlaps(const MemsetFillJob& a, const MemsetFillJob& b) {
  const auto a0 = reinterpret_cast<uintptr_t>(a.dst), b0 = reinterpret_cast<uintptr_t>(b.dst);
  return a0 < b0 + b.row_bytes && b0 < a0 + a.row_bytes;
}

// The memsets that follow `head` one after the other and may share its fill kernel.
std::vector<cudaGraphNode_t> mergeable_chain(cudaGraphNode_t head, const MemsetFillJob& head_job,
                                             std::vector<cudaMemsetParams>& params) {
  std::vector<cudaGraphNode_t> chain = {head};
  std::vector<MemsetFillJob> jobs = {head_job};
  if (head_job.rows != 1) return chain;
  while (chain.size() < static_cast<size_t>(kMaxMergedMemsets)) {
    const NodeEdges out = node_dependents(chain.back());
    if (out.nodes.size() != 1 || !is_default_edge(out.data[0])) break;
    const cudaGraphNode_t next = out.nodes[0];
    cudaMemsetParams p{};
    MemsetFillJob job;
    if (!lowerable(next, p, job) || job.rows != 1 || node_dependencies(next).nodes.size() != 1) break;
    bool disjoint = true;
    for (const MemsetFillJob& j : jobs) disjoint = disjoint && !overlaps(j, job);
    if (!disjoint) break;
    chain.push_back(next);
    jobs.push_back(job);
    params.push_back(p);
  }
  return chain;
}

}  // namespace

int lower_memset_nodes(cudaGraph_t graph) {
  int lowered = 0;
  std::unordered_set<cudaGraphNode_t> replaced;
  // Creation order is capture order, so a chain is met at its head first.
  for (cudaGraphNode_t node : graph_nodes(graph)) {
    if (replaced.count(node) != 0) continue;
    std::vector<cudaMemsetParams> params(1);
    MemsetFillJob job;
    if (!lowerable(node, params[0], job)) continue;
    const std::vector<cudaGraphNode_t> chain = mergeable_chain(node, job, params);

    const NodeEdges in = node_dependencies(chain.front());
    const NodeEdges out = node_dependents(chain.back());
    // A zero-byte memset still orders its neighbours: the node stays, as a kernel with nothing to do.
    MemsetFillJobs jobs;
    cudaGraphNodeParams kernel{};
    kernel.type = cudaGraphNodeTypeKernel;
    void* args[1] = {};
    if (chain.size() == 1) {
      const LaunchShape shape = launch_shape(job);
      args[0] = &job;
      kernel.kernel.func = reinterpret_cast<void*>(&memset_fill_kernel);
      kernel.kernel.gridDim = shape.grid;
      kernel.kernel.blockDim = shape.block;
    } else {
      jobs = memset_fill_jobs(params.data(), static_cast<int>(params.size()));
      args[0] = &jobs;
      kernel.kernel.func = reinterpret_cast<void*>(&memset_fill_jobs_kernel);
      kernel.kernel.gridDim = dim3(jobs.block_end[jobs.count - 1]);
      kernel.kernel.blockDim = dim3(kJobThreads);
    }
    kernel.kernel.kernelParams = args;
    cudaGraphNode_t fill = nullptr;
    SG_CUDA_CHECK(cudaGraphAddNode(&fill, graph, in.nodes.data(), in.data.data(), in.nodes.size(), &kernel));
    if (!out.nodes.empty()) {
      // The memset's outgoing edges left a node without ports: their data is the plain default.
      const std::vector<cudaGraphNode_t> from(out.nodes.size(), fill);
      SG_CUDA_CHECK(cudaGraphAddDependencies(graph, from.data(), out.nodes.data(), out.data.data(), out.nodes.size()));
    }
    for (cudaGraphNode_t n : chain) {
      SG_CUDA_CHECK(cudaGraphDestroyNode(n));
      replaced.insert(n);
    }
    lowered += static_cast<int>(chain.size());
  }
  return lowered;
}

}  // namespace sg::graph

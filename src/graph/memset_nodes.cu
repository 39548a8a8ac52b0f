// The fill kernel that stands in for memset nodes, and the graph rewrite (see memset_nodes.h for why).
#include "graph/memset_nodes.h"

#include <algorithm>
#include <vector>

#include "core/strings.h"
#include "cuda/check.h"
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

void launch_memset_fill(cudaStream_t stream, const MemsetFillJob& job) {
  if (job.row_bytes == 0 || job.rows == 0) return;
  const LaunchShape shape = launch_shape(job);
  memset_fill_kernel<<<shape.grid, shape.block, 0, stream>>>(job);
  SG_CUDA_CHECK_LAUNCH("memset_fill_kernel");
}

int lower_memset_nodes(cudaGraph_t graph) {
  int lowered = 0;
  for (cudaGraphNode_t node : graph_nodes(graph)) {
    cudaGraphNodeType type{};
    SG_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeMemset) continue;
    cudaMemsetParams memset{};
    SG_CUDA_CHECK(cudaGraphMemsetNodeGetParams(node, &memset));
    MemsetFillJob job = memset_fill_job(memset);
    if (job.row_bytes * job.rows >= kLargestLoweredMemsetBytes) continue;

    size_t n_in = 0, n_out = 0;
    SG_CUDA_CHECK(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &n_in));
    SG_CUDA_CHECK(cudaGraphNodeGetDependentNodes(node, nullptr, nullptr, &n_out));
    std::vector<cudaGraphNode_t> in(n_in), out(n_out);
    std::vector<cudaGraphEdgeData> in_edges(n_in), out_edges(n_out);
    if (n_in > 0) SG_CUDA_CHECK(cudaGraphNodeGetDependencies(node, in.data(), in_edges.data(), &n_in));
    if (n_out > 0) SG_CUDA_CHECK(cudaGraphNodeGetDependentNodes(node, out.data(), out_edges.data(), &n_out));

    // A zero-byte memset still orders its neighbours: the node stays, as a kernel with nothing to do.
    const LaunchShape shape = launch_shape(job);
    void* args[] = {&job};
    cudaGraphNodeParams params{};
    params.type = cudaGraphNodeTypeKernel;
    params.kernel.func = reinterpret_cast<void*>(&memset_fill_kernel);
    params.kernel.gridDim = shape.grid;
    params.kernel.blockDim = shape.block;
    params.kernel.kernelParams = args;
    cudaGraphNode_t fill = nullptr;
    SG_CUDA_CHECK(cudaGraphAddNode(&fill, graph, in.data(), in_edges.data(), n_in, &params));
    if (n_out > 0) {
      // The memset's outgoing edges left a node without ports: their data is the plain default.
      const std::vector<cudaGraphNode_t> from(n_out, fill);
      SG_CUDA_CHECK(cudaGraphAddDependencies(graph, from.data(), out.data(), out_edges.data(), n_out));
    }
    SG_CUDA_CHECK(cudaGraphDestroyNode(node));
    ++lowered;
  }
  return lowered;
}

}  // namespace sg::graph

#pragma once
// Routings shared by the grouped GEMM GPU tests (grouped_gemm_gpu_test.cu, grouped_gemm_overwrite_gpu_test.cu):
// per-expert row counts and segment offsets in the layouts the MoE layer produces (dropless back to back,
// token-drop at capacity strides), the CPU twin's view of them, and the CUDA-graph check that a captured
// grouped GEMM follows the counts in device memory.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "cuda/check.h"
#include "gpu_test_util.h"
#include "kernel_gpu_test_util.h"
#include "kernels/grouped_gemm.h"
#include "reference/grouped_gemm.h"

namespace sg::test {

struct Routing {
  std::string name;
  int64_t N, K;
  std::vector<int32_t> counts, offsets;
  int64_t total_rows;
};

inline void PrintTo(const Routing& r, std::ostream* os) { *os << r.name; }  // gtest's name for a parameter

// Segments back to back from row 0; total_rows = their sum (dropless).
inline Routing packed(std::string name, int64_t N, int64_t K, std::vector<int32_t> counts) {
  Routing r{std::move(name), N, K, std::move(counts), {}, 0};
  for (int32_t c : r.counts) {
    r.offsets.push_back(static_cast<int32_t>(r.total_rows));
    r.total_rows += c;
  }
  return r;
}

// Token-drop layout: expert g's segment starts at g * capacity; rows past count_g stay unused.
inline Routing capacity(std::string name, int64_t N, int64_t K, int32_t cap, std::vector<int32_t> counts) {
  Routing r{std::move(name), N, K, std::move(counts), {}, 0};
  for (size_t g = 0; g < r.counts.size(); ++g) r.offsets.push_back(static_cast<int32_t>(g) * cap);
  r.total_rows = static_cast<int64_t>(r.counts.size()) * cap;
  return r;
}

// 128 experts, random counts in [0, 40] with about a fifth of them empty.
inline Routing many_experts() {
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> count(0, 40);
  std::vector<int32_t> counts(128);
  for (auto& c : counts) c = count(gen) < 8 ? 0 : count(gen);
  return packed("experts128", 200, 136, counts);
}

// The routings every grouped GEMM GPU test runs: one expert, balanced, zero-row experts (first, middle,
// last), all rows on one expert, skewed odd counts, capacity segments with unused padding rows, every
// expert empty, 128 experts; N/K multiples of 8 that are not tile multiples (72, 136, 200) and 256/768.
inline std::vector<Routing> standard_routings() {
  return {packed("one_expert", 136, 200, {77}),
          packed("balanced8", 768, 256, {64, 64, 64, 64, 64, 64, 64, 64}),
          packed("zero_experts", 200, 136, {0, 37, 0, 129, 1, 0}),
          packed("all_on_one", 72, 768, {0, 0, 301, 0}),
          packed("skewed_odd", 136, 72, {1, 255, 3, 0, 17, 129, 2, 64}),
          capacity("capacity_padding", 200, 136, 48, {48, 0, 13, 47, 1}),
          capacity("all_empty", 64, 64, 16, {0, 0, 0}),
          many_experts()};
}

inline ref::GroupedRows rows_of(const Routing& r) {
  return {r.counts.data(), r.offsets.data(), static_cast<int>(r.counts.size()), r.total_rows};
}

inline kernels::GroupedGemmDims dims_of(const Routing& r) {
  return {.num_groups = static_cast<int>(r.counts.size()), .max_total_rows = r.total_rows, .N = r.N, .K = r.K};
}

// One capture of enqueue(stream), replayed once per routing after its counts/offsets were uploaded into
// the same device buffers: after each replay check(routing, out) judges the poisoned-then-written output,
// and an eager enqueue on a fresh poison must give the same bytes. (DeviceBuffer upload/poison run on the
// legacy default stream, hence the device syncs before launching on `stream`.)
template <class T>
void expect_replays_follow_routings(cudaStream_t stream, const std::function<void(cudaStream_t)>& enqueue,
                                    std::initializer_list<const Routing*> routings, DeviceBuffer<int32_t>& counts,
                                    DeviceBuffer<int32_t>& offsets, DeviceBuffer<T>& out,
                                    const std::function<void(const Routing&, const std::vector<T>&)>& check) {
  cudaGraph_t graph = nullptr;
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  enqueue(stream);
  SG_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (const Routing* routing : routings) {
    counts.upload(routing->counts);
    offsets.upload(routing->offsets);
    out.poison();
    sync_device();
    SG_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    SG_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<T> replayed = out.download();
    check(*routing, replayed);
    out.poison();
    sync_device();
    enqueue(stream);
    SG_CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_TRUE(bitwise_equal(replayed, out.download())) << "replay != eager for routing " << routing->name;
  }
  SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SG_CUDA_CHECK(cudaGraphDestroy(graph));
}

}  // namespace sg::test

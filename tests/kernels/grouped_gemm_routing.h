#pragma once
// Routings shared by the grouped GEMM GPU tests (grouped_gemm_gpu_test.cu, grouped_gemm_overwrite_gpu_test.cu):
// per-expert row counts and segment offsets in the layouts the MoE layer produces (dropless back to back,
// token-drop at capacity strides), the CPU twin's view of them, and small device helpers.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "cuda/check.h"
#include "kernels/grouped_gemm.h"
#include "reference/grouped_gemm.h"

namespace sg::test {

// DeviceBuffer upload/poison run on the legacy default stream, which does not order against the
// non-blocking test stream: finish them before launching on `stream`.
inline void device_sync() { SG_CUDA_CHECK(cudaDeviceSynchronize()); }

template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

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

inline ref::GroupedRows rows_of(const Routing& r) {
  return {r.counts.data(), r.offsets.data(), static_cast<int>(r.counts.size()), r.total_rows};
}

inline kernels::GroupedGemmDims dims_of(const Routing& r) {
  return {.num_groups = static_cast<int>(r.counts.size()), .max_total_rows = r.total_rows, .N = r.N, .K = r.K};
}

}  // namespace sg::test

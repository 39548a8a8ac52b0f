#pragma once
// GPU test helpers: RAII device buffers, bf16 upload/download, poisoning so unwritten outputs fail.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cuda/arena.h"
#include "cuda/bf16.h"
#include "cuda/check.h"
#include "test_util.h"

namespace sg::test {

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n)
      : p_(static_cast<T*>(cuda::device_allocate(std::max<size_t>(n, 1) * sizeof(T), "test DeviceBuffer"))), n_(n) {}
  ~DeviceBuffer() { cuda::device_free_noexcept(p_, "test DeviceBuffer"); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return p_; }
  size_t size() const { return n_; }
  // Every transfer synchronises the whole device first and last: kernels under test run on
  // non-blocking streams, which the legacy default stream of cudaMemcpy/cudaMemset does not wait for.
  void upload(const std::vector<T>& host) {
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    SG_CUDA_CHECK(cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    SG_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    SG_CUDA_CHECK(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  // Fill with 0xFF bytes: NaN for float and bf16, so an element a kernel forgot to write fails.
  void poison() {
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    SG_CUDA_CHECK(cudaMemset(p_, 0xFF, n_ * sizeof(T)));
    SG_CUDA_CHECK(cudaDeviceSynchronize());
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

inline std::vector<bf16> to_bf16(const std::vector<float>& v) {
  std::vector<bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t bits = float_to_bf16_bits(v[i]);
    std::memcpy(static_cast<void*>(&out[i]), &bits, 2);
  }
  return out;
}

inline std::vector<float> to_float(const std::vector<bf16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, &v[i], 2);
    out[i] = bf16_bits_to_float(bits);
  }
  return out;
}

// Rounds through bf16, so a CPU reference sees exactly the inputs the GPU kernel sees.
inline std::vector<float> round_bf16(const std::vector<float>& v) { return to_float(to_bf16(v)); }

}  // namespace sg::test

#pragma once
// A device buffer of floating-point values stored in fp32 or bf16, and which of the two. Megatron lets a
// user keep the Adam moments (optimizer.exp_avg_dtype, optimizer.exp_avg_sq_dtype) and the main gradients
// (ddp.grad_reduce_in_fp32=false) in bf16; the kernels that read or write such a buffer compute in fp32 and
// round to nearest even only where they store bf16.
#include <cstddef>
#include <cstdint>

#include "cuda/bf16.h"

namespace sg::kernels {

enum class FloatDtype : uint8_t { fp32, bf16 };

constexpr size_t float_dtype_bytes(FloatDtype dtype) { return dtype == FloatDtype::bf16 ? 2 : 4; }
constexpr const char* float_dtype_name(FloatDtype dtype) { return dtype == FloatDtype::bf16 ? "bf16" : "fp32"; }

// The pointer's type picks the dtype, so a call site cannot pair a bf16 pointer with fp32.
struct FloatBuffer {
  void* data = nullptr;
  FloatDtype dtype = FloatDtype::fp32;
  FloatBuffer() = default;
  FloatBuffer(float* fp32_data) : data(fp32_data), dtype(FloatDtype::fp32) {}  // NOLINT: implicit on purpose
  FloatBuffer(bf16* bf16_data) : data(bf16_data), dtype(FloatDtype::bf16) {}   // NOLINT: implicit on purpose

  bool is_bf16() const { return dtype == FloatDtype::bf16; }
  size_t element_bytes() const { return float_dtype_bytes(dtype); }
  // The same buffer from element `offset` on.
  FloatBuffer at(int64_t offset) const {
    FloatBuffer b = *this;
    b.data = static_cast<char*>(data) + offset * static_cast<int64_t>(element_bytes());
    return b;
  }
};

}  // namespace sg::kernels

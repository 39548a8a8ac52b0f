// The decoding linear on the GPU (kernels/decode_linear.h), on decode_linear_case.h's scenario: the decoding
// step's shapes of the shipped model families (Llama 1b's qkv, o, fc1 with SwiGLU and fc2; a Nemotron-H MLP with
// squared ReLU; a Mamba in_proj width), row counts 1 to 8, N not a multiple of a block's rows, K not a multiple of
// a pass; outputs poisoned, the fused epilogues bitwise the linear followed by kernels/swiglu.h or
// kernels/squared_relu.h, each row bitwise itself alone; the QKV epilogue bitwise kNone + rope_forward +
// kv_cache_append at the attention shapes of Llama 1b, a Mixtral and a Nemotron-H (no RoPE), and with Llama 3
// scaling; each of those without a bias and with a random one (at an odd element offset: 2-byte aligned only); the
// bias added to the fp32 sum before rounding, exactly; eager reruns and a CUDA-graph replay bitwise the first run,
// with and without a bias. The launcher's checks and the reduction are tested on the CPU
// (decode_linear_emulated_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernel_gpu_test_util.h"
#include "kernels/decode_attention.h"
#include "kernels/decode_linear.h"
#include "kernels/decode_linear_case.h"
#include "kernels/rope.h"
#include "kernels/squared_relu.h"
#include "kernels/swiglu.h"

namespace {

using namespace sg;
using kernels::DecodeLinearEpilogue;

// A bias on the device: null for an empty one, else one element into a buffer, so aligned to 2 bytes only.
class DeviceBias {
 public:
  explicit DeviceBias(const std::vector<bf16>& bias) : buffer_(bias.size() + 1), empty_(bias.empty()) {
    std::vector<bf16> padded(bias.size() + 1, bf16{});
    std::copy(bias.begin(), bias.end(), padded.begin() + 1);
    buffer_.upload(padded);
  }
  const bf16* get() const { return empty_ ? nullptr : buffer_.get() + 1; }

 private:
  test::DeviceBuffer<bf16> buffer_;
  bool empty_;
};

class GpuBackend {
 public:
  bool tensor_cores = false;  // which math decode_linear_forward runs

  std::vector<bf16> run(const std::vector<bf16>& x, const std::vector<bf16>& w, const std::vector<bf16>& bias,
                        int64_t T, int64_t K, int64_t N, DecodeLinearEpilogue epilogue) {
    const int64_t F = kernels::decode_linear_out_width(epilogue, N);
    test::DeviceBuffer<bf16> dx(x.size()), dw(w.size()), dy((T + 1) * F);
    const DeviceBias db(bias);
    dx.upload(x);
    dw.upload(w);
    dy.poison();
    kernels::decode_linear_forward(stream_, {.y = dy.get(),
                                             .x = dx.get(),
                                             .w = dw.get(),
                                             .bias = db.get(),
                                             .T = T,
                                             .K = K,
                                             .N = N,
                                             .epilogue = epilogue,
                                             .tensor_cores = tensor_cores});
    test::sync_device();
    return dy.download();
  }
  std::vector<bf16> activation(const std::vector<bf16>& pre, int64_t T, int64_t F, DecodeLinearEpilogue e) {
    test::DeviceBuffer<bf16> din(pre.size()), dout(T * F);
    din.upload(pre);
    dout.poison();
    if (e == DecodeLinearEpilogue::kSwiglu) {
      kernels::swiglu_forward(stream_, {.out = dout.get(), .gate_up = din.get(), .T = T, .F = F});
    } else {
      kernels::squared_relu_forward(stream_, {.out = dout.get(), .in = din.get(), .T = T, .F = F});
    }
    test::sync_device();
    return dout.download();
  }
  test::QkvOutputs run_qkv(const std::vector<bf16>& x, const std::vector<bf16>& w, const std::vector<bf16>& bias,
                           int64_t K, kernels::DecodeQkvEpilogue e, const std::vector<int32_t>& positions, bool fused) {
    const ref::DecodeAttentionShape& s = e.shape;
    const int64_t N = s.qkv_width(), cache = s.slots * s.kv_heads * s.capacity * s.head_dim;
    test::DeviceBuffer<bf16> dx(x.size()), dw(w.size()), dy(s.T * N), dk(cache), dv(cache);
    const DeviceBias db(bias);
    test::DeviceBuffer<int32_t> dpos(positions.size());
    dx.upload(x);
    dw.upload(w);
    dy.poison();
    dk.upload(test::to_bf16(test::random_normal(cache, 21)));
    dv.upload(test::to_bf16(test::random_normal(cache, 22)));
    dpos.upload(positions);
    e.k_cache = dk.get();
    e.v_cache = dv.get();
    e.positions = dpos.get();
    kernels::decode_linear_forward(
        stream_, test::qkv_linear_params(dy.get(), dx.get(), dw.get(), db.get(), K, e, fused, tensor_cores));
    if (!fused) {
      if (e.rope) kernels::rope_forward(stream_, kernels::decode_qkv_rope_params(dy.get(), e));
      kernels::kv_cache_append(stream_, kernels::decode_qkv_append_params(dy.get(), e));
    }
    test::sync_device();
    return {.y = dy.download(), .k_cache = dk.download(), .v_cache = dv.download()};
  }

 private:
  cuda::Stream stream_;
};

TEST(DecodeLinearGpu, MatchesReferenceAndUnfusedAndRowsAlone) {
  GpuBackend backend;
  const test::DecodeLinearCase cases[] = {
      {1, 2048, 6144, DecodeLinearEpilogue::kNone},     // Llama 1b qkv, batch 1
      {8, 2048, 2048, DecodeLinearEpilogue::kNone},     // o, batch 8
      {1, 2048, 11264, DecodeLinearEpilogue::kSwiglu},  // fc1 + SwiGLU
      {8, 2048, 11264, DecodeLinearEpilogue::kSwiglu},
      {3, 5632, 2048, DecodeLinearEpilogue::kNone},         // fc2, 3 rows (the 4-row kernel)
      {5, 1024, 3072, DecodeLinearEpilogue::kSquaredRelu},  // a Nemotron-H MLP, 5 rows (the 8-row kernel)
      {2, 1024, 4384, DecodeLinearEpilogue::kNone},         // a Mamba in_proj width
      {7, 4104, 1001, DecodeLinearEpilogue::kNone},         // K past a pass of 256 chunks, N odd
      {4, 8, 6, DecodeLinearEpilogue::kSwiglu},             // one chunk of K
  };
  test::check_with_both_maths_and_bias(backend, cases, test::check_decode_linear_case<GpuBackend>);
}

TEST(DecodeLinearGpu, QkvEpilogueIsTheLinearThenRopeThenTheAppend) {
  GpuBackend backend;
  const test::DecodeQkvCase cases[] = {
      {1, 2048, 16, 16, 128, true, 0.0},     // Llama 1b, batch 1
      {4, 2048, 16, 16, 128, true, 8.0},     // Llama 3 scaled frequencies, 4 rows
      {3, 768, 12, 4, 64, true, 0.0},        // a Mixtral: grouped KV heads
      {2, 1024, 8, 2, 128, false, 0.0},      // a Nemotron-H: no RoPE
      {8, 264, 4, 2, 72, true, 0.0},         // 8 rows, head_dim not a multiple of 16
      {1, 3072, 24, 8, 128, true, 0.0, 96},  // Phi-4-mini's attention: 96 of 128 dimensions rotated
      {5, 264, 4, 2, 72, true, 0.0, 24},     // partial rotary, head_dim not a multiple of 16
      {4, 3072, 24, 8, 128, true, 0.0, 96, true},  // Phi-4-mini's with LongRoPE
      {2, 3072, 32, 32, 96, true, 0.0, 0, true},   // Phi-3.5-mini's: heads of 96, LongRoPE
  };
  test::check_with_both_maths_and_bias(backend, cases, test::check_decode_qkv_case<GpuBackend>);
}

TEST(DecodeLinearGpu, BiasJoinsTheSumBeforeRounding) {
  GpuBackend backend;
  for (const bool tensor_cores : {false, true}) {
    SCOPED_TRACE(tensor_cores ? "tensor cores" : "fp32 multiply-adds");
    backend.tensor_cores = tensor_cores;
    test::check_decode_linear_bias_before_rounding(backend);
  }
}

TEST(DecodeLinearGpu, EagerRerunsAndGraphReplayAreBitwiseEqual) {
  struct Run {
    test::DecodeLinearCase c;
    bool tensor_cores, bias;
  };
  for (const auto& [c, tensor_cores, with_bias] : {Run{{8, 2048, 11264, DecodeLinearEpilogue::kSwiglu}, false, false},
                                                   Run{{1, 5632, 2048, DecodeLinearEpilogue::kNone}, false, false},
                                                   Run{{8, 2048, 11264, DecodeLinearEpilogue::kSwiglu}, true, false},
                                                   Run{{8, 2048, 11264, DecodeLinearEpilogue::kSwiglu}, false, true},
                                                   Run{{3, 2048, 6144, DecodeLinearEpilogue::kNone}, true, true}}) {
    SCOPED_TRACE(test::describe(c) + (tensor_cores ? " tensor cores" : "") + (with_bias ? " with bias" : ""));
    const int64_t F = kernels::decode_linear_out_width(c.epilogue, c.N);
    test::DeviceBuffer<bf16> dx(c.T * c.K), dw(c.N * c.K), dy(c.T * F);
    dx.upload(test::to_bf16(test::random_normal(c.T * c.K, 5)));
    dw.upload(test::to_bf16(test::random_normal(c.N * c.K, 6, 0.02f)));
    const DeviceBias db(with_bias ? test::to_bf16(test::random_normal(c.N, 7)) : std::vector<bf16>{});
    cuda::Stream stream;
    const auto enqueue = [&](cudaStream_t s) {
      kernels::decode_linear_forward(s, {.y = dy.get(),
                                         .x = dx.get(),
                                         .w = dw.get(),
                                         .bias = db.get(),
                                         .T = c.T,
                                         .K = c.K,
                                         .N = c.N,
                                         .epilogue = c.epilogue,
                                         .tensor_cores = tensor_cores});
    };
    const auto snapshot = [&] { return test::Snapshot{test::named_bytes("y", dy.download())}; };
    dy.poison();
    enqueue(stream);
    test::sync_device();
    const test::Snapshot first = snapshot();
    test::expect_bitwise_repeatable(
        stream, [&] { dy.poison(); }, enqueue, snapshot, first);
  }
}

}  // namespace

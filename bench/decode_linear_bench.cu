// The decoding step's linears: kernels/decode_linear.h's matrix-vector kernel (its fp32 multiply-adds, which the
// decoder runs, and its tensor-core variant) against what the decoder ran before
// it, cuBLASLt's GEMM (kernels/gemm.h's LinearForward) followed by the activation kernel where the linear has one
// (and for the attention's QKV projection by RoPE and the KV-cache append, against the kernel's fused epilogue),
// at the shapes of bench/generate_reference.py's models, for 1, 2, 4 and 8 rows. Each variant is timed inside a CUDA
// graph of --calls launches, as the decoder replays it, the calls rotating through copies of the weight that
// together exceed the L2 cache (a decoding step reads each layer's weights once, from memory). The median replay
// over --iters (CUDA events) after --warmup, divided by --calls; the three variants' replays alternate. GB/s counts
// the weight's bytes once a call.
// Usage: build/bench/decode_linear_bench [--iters N] [--warmup N] [--calls N] (--help: the flags).
#include <algorithm>
#include <cstdio>
#include <vector>

#include "bench_args.h"
#include "bench_device.h"
#include "cuda/check.h"
#include "cuda/stream.h"
#include "graph_replay_timer.h"
#include "kernels/decode_attention.h"
#include "kernels/decode_linear.h"
#include "kernels/gemm.h"
#include "kernels/rope.h"
#include "kernels/squared_relu.h"
#include "kernels/swiglu.h"

namespace {

using namespace sg;
using kernels::DecodeLinearEpilogue;

struct Shape {
  const char* model;
  const char* linear;
  int64_t K, N;
  DecodeLinearEpilogue epilogue;
  int64_t heads = 0, kv_heads = 0, head_dim = 0;  // kQkv: the attention's geometry (N = its QKV width)
  bool rope = false;                              // kQkv: rotate q and k
};

constexpr int64_t kCachePositions = 256;  // kQkv: each row appends at position 200 of a 256-position cache

constexpr size_t kRotationBytes = size_t{256} << 20;  // the weight copies' total: five times an H100's L2

struct Result {
  double gemv_us, mma_us, gemm_us;  // fp32 multiply-adds, tensor cores, cuBLASLt
};

Result bench_shape(const Shape& s, int64_t T, int warmup, int iters, int calls) {
  const int64_t F = kernels::decode_linear_out_width(s.epilogue, s.N);
  const size_t w_elems = static_cast<size_t>(s.N * s.K);
  const size_t copies = std::max<size_t>(2, kRotationBytes / (w_elems * sizeof(bf16)) + 1);
  bf16* w = bench::device_alloc<bf16>(w_elems * copies);
  bf16* x = bench::device_alloc<bf16>(static_cast<size_t>(T * s.K));
  bf16* pre = bench::device_alloc<bf16>(static_cast<size_t>(T * s.N));
  bf16* y = bench::device_alloc<bf16>(static_cast<size_t>(T * F));
  for (size_t c = 0; c < copies; ++c) bench::upload(w + c * w_elems, bench::random_bf16(w_elems, 1 + c, 0.02f));
  bench::upload(x, bench::random_bf16(static_cast<size_t>(T * s.K), 7, 1.0f));
  // kQkv: a KV cache of a slot per row, every row at position 200.
  kernels::DecodeQkvEpilogue qkv{.rope = s.rope};
  const bool attention = s.epilogue == DecodeLinearEpilogue::kQkv;
  const size_t cache = attention ? static_cast<size_t>(T * s.kv_heads * kCachePositions * s.head_dim) : 0;
  int32_t* positions = bench::device_alloc<int32_t>(static_cast<size_t>(T));
  bf16* k_cache = bench::device_alloc<bf16>(cache);
  bf16* v_cache = bench::device_alloc<bf16>(cache);
  if (attention) {
    bench::upload(positions, std::vector<int32_t>(static_cast<size_t>(T), 200));
    qkv = {.k_cache = k_cache,
           .v_cache = v_cache,
           .positions = positions,
           .shape = {.T = T,
                     .slots = T,
                     .capacity = kCachePositions,
                     .heads = s.heads,
                     .kv_heads = s.kv_heads,
                     .head_dim = s.head_dim},
           .rope = s.rope};
  }
  kernels::Blas blas;
  const auto weight = [&](int call) { return w + static_cast<size_t>(call) % copies * w_elems; };
  cuda::Stream stream;
  const auto kernel = [&](bool tensor_cores) {
    return [&, tensor_cores](cudaStream_t st, int call) {
      kernels::decode_linear_forward(st, {.y = y,
                                          .x = x,
                                          .w = weight(call),
                                          .T = T,
                                          .K = s.K,
                                          .N = s.N,
                                          .epilogue = s.epilogue,
                                          .qkv = qkv,
                                          .tensor_cores = tensor_cores});
    };
  };
  bench::GraphReplayTimer gemv(stream, calls, kernel(false), "decode_linear_bench");
  bench::GraphReplayTimer mma(stream, calls, kernel(true), "decode_linear_bench");
  bench::GraphReplayTimer gemm(
      stream, calls,
      [&](cudaStream_t st, int call) {
        const kernels::LinearForward linear(blas, T, s.K, s.N);
        if (attention) {  // as the attention layer runs a prompt's rows
          linear.run(st, y, x, weight(call));
          if (s.rope) kernels::rope_forward(st, kernels::decode_qkv_rope_params(y, qkv));
          kernels::kv_cache_append(st, kernels::decode_qkv_append_params(y, qkv));
        } else if (s.epilogue == DecodeLinearEpilogue::kNone) {
          linear.run(st, y, x, weight(call));
        } else if (s.epilogue == DecodeLinearEpilogue::kSwiglu) {
          linear.run(st, pre, x, weight(call));
          kernels::swiglu_forward(st, {.out = y, .gate_up = pre, .T = T, .F = F});
        } else {
          linear.run(st, pre, x, weight(call));
          kernels::squared_relu_forward(st, {.out = y, .in = pre, .T = T, .F = F});
        }
      },
      "decode_linear_bench");
  gemv.warm(warmup);
  mma.warm(warmup);
  gemm.warm(warmup);
  cuda::Event start(true), stop(true);
  for (int i = 0; i < iters; ++i) {
    gemv.time_once(start, stop);
    mma.time_once(start, stop);
    gemm.time_once(start, stop);
  }
  for (void* p : std::initializer_list<void*>{w, x, pre, y, positions, k_cache, v_cache}) SG_CUDA_CHECK(cudaFree(p));
  return {gemv.median_us(), mma.median_us(), gemm.median_us()};
}

}  // namespace

int main(int argc, char** argv) {
  const bench::ToolArgs args = bench::read_tool_args(
      argc, argv,
      {.program = "decode_linear_bench",
       .about =
           "Times the decoding step's linears: kernels/decode_linear.h's matrix-vector kernel, in fp32\n"
           "multiply-adds and on tensor cores (its activation, or RoPE and the KV-cache append, fused), against\n"
           "cuBLASLt's GEMM plus those kernels, at the shapes of\n"
           "bench/generate_reference.py's models, for 1, 2, 4 and 8 rows. Each variant inside a CUDA graph of --calls\n"
           "launches over copies of the weight that exceed the L2 cache; the median replay over --iters (CUDA\n"
           "events, the variants alternating) after --warmup, divided by --calls. Prints a table; writes\n"
           "nothing. Needs a CUDA GPU.",
       .flags = bench::graph_replay_flags()});
  const auto [iters, warmup, calls] = bench::graph_replay_counts(args);
  const Shape shapes[] = {
      {"llama_1b", "qkv", 2048, 6144, DecodeLinearEpilogue::kNone},
      {"llama_1b", "qkv + rope + append", 2048, 6144, DecodeLinearEpilogue::kQkv, 16, 16, 128, true},
      {"llama_1b", "o", 2048, 2048, DecodeLinearEpilogue::kNone},
      {"llama_1b", "fc1 + swiglu", 2048, 11264, DecodeLinearEpilogue::kSwiglu},
      {"llama_1b", "fc2", 5632, 2048, DecodeLinearEpilogue::kNone},
      {"mixtral_small", "qkv", 768, 1280, DecodeLinearEpilogue::kNone},
      {"mixtral_small", "qkv + rope + append", 768, 1280, DecodeLinearEpilogue::kQkv, 12, 4, 64, true},
      {"mixtral_small", "o", 768, 768, DecodeLinearEpilogue::kNone},
      {"nemotron_h_small", "mamba in_proj", 1024, 6176, DecodeLinearEpilogue::kNone},
      {"nemotron_h_small", "mamba out_proj", 2048, 1024, DecodeLinearEpilogue::kNone},
      {"nemotron_h_small", "qkv", 1024, 1536, DecodeLinearEpilogue::kNone},
      {"nemotron_h_small", "qkv + append", 1024, 1536, DecodeLinearEpilogue::kQkv, 8, 2, 128, false},
      {"nemotron_h_small", "fc1 + relu2", 1024, 2816, DecodeLinearEpilogue::kSquaredRelu},
      {"nemotron_h_small", "fc2", 2816, 1024, DecodeLinearEpilogue::kNone},
  };
  try {
    std::printf(
        "decode_linear_forward against cuBLASLt (+ the activation kernel), median of %d graph replays of %d "
        "calls after %d warmup\n",
        iters, calls, warmup);
    std::printf(
        "| model | linear | K x N | weight MB | rows | fp32 FMA us | GB/s | tensor cores us | GB/s | cuBLASLt us | "
        "GB/s "
        "| FMA speedup | tensor-core speedup |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const Shape& s : shapes) {
      for (const int64_t T : {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{8}}) {
        const Result r = bench_shape(s, T, warmup, iters, calls);
        const double mb = static_cast<double>(s.N * s.K * 2) / 1e6;
        std::printf(
            "| %s | %s | %lld x %lld | %.1f | %lld | %.2f | %.0f | %.2f | %.0f | %.2f | %.0f | %.2fx | %.2fx |\n",
            s.model, s.linear, static_cast<long long>(s.K), static_cast<long long>(s.N), mb, static_cast<long long>(T),
            r.gemv_us, mb * 1e3 / r.gemv_us, r.mma_us, mb * 1e3 / r.mma_us, r.gemm_us, mb * 1e3 / r.gemm_us,
            r.gemm_us / r.gemv_us, r.gemm_us / r.mma_us);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode_linear_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}

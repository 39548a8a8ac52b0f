// KV-cache attention alone (kernels/decode_attention.h: decode_attention_forward, split and merge) at the shapes of
// bench/generate_reference.py's models: one decoding step of batch 1 and 8 with the rows at the last position of
// a 256-position cache (128-token prompts, 128 new tokens) and of a 4096-position one, and a 128-token prefill.
// Each call is timed inside a CUDA graph of --calls launches, as the decoder replays it: the median over --iters
// replays (CUDA events) after --warmup, divided by --calls. The KV bytes column counts each sequence's keys and
// values up to its position once; GB/s is that over the time (H100 HBM3: about 3,350 GB/s at most).
// Usage: build/bench/decode_attention_bench [--iters N] [--warmup N] [--calls N] (--help: the flags).
#include <algorithm>
#include <cstdio>
#include <vector>

#include "bench_args.h"
#include "bench_device.h"
#include "cuda/check.h"
#include "cuda/stream.h"
#include "graph_replay_timer.h"
#include "kernels/decode_attention.h"

namespace {

using namespace sg;

struct Shape {
  const char* name;
  int64_t T, rows_per_slot, heads, kv_heads, head_dim, capacity;
};

using bench::device_alloc;

struct Timing {
  double us_per_call, kv_bytes;
};

// Rows of a decoding step sit at the cache's last position; a prefill's rows at positions 0 .. T-1 of one slot.
Timing bench_shape(const Shape& shape, int warmup, int iters, int calls) {
  const int64_t slots = shape.T / shape.rows_per_slot;
  const ref::DecodeAttentionShape s{.T = shape.T,
                                    .rows_per_slot = shape.rows_per_slot,
                                    .slots = slots,
                                    .capacity = shape.capacity,
                                    .heads = shape.heads,
                                    .kv_heads = shape.kv_heads,
                                    .head_dim = shape.head_dim};
  const size_t cache = static_cast<size_t>(slots * s.kv_heads * s.capacity * s.head_dim);
  const size_t qkv = static_cast<size_t>(s.T * s.qkv_width()), out = static_cast<size_t>(s.T * s.heads * s.head_dim);
  const size_t workspace_bytes = kernels::decode_attention_workspace_bytes(s.head_dim);
  bf16 *k = device_alloc<bf16>(cache), *v = device_alloc<bf16>(cache), *q = device_alloc<bf16>(qkv),
       *o = device_alloc<bf16>(out);
  void* workspace = device_alloc<unsigned char>(workspace_bytes);
  int32_t* positions = device_alloc<int32_t>(static_cast<size_t>(s.T));
  bench::upload(k, bench::random_bf16(cache, 1, 1.0f));
  bench::upload(v, bench::random_bf16(cache, 2, 1.0f));
  bench::upload(q, bench::random_bf16(qkv, 3, 1.0f));
  std::vector<int32_t> host_positions(static_cast<size_t>(s.T));
  int64_t keys = 0;  // per slot, the most keys a row reads
  for (int64_t t = 0; t < s.T; ++t) {
    host_positions[t] = static_cast<int32_t>(shape.rows_per_slot == 1 ? s.capacity - 1 : t % shape.rows_per_slot);
    keys = std::max<int64_t>(keys, host_positions[t] + 1);
  }
  SG_CUDA_CHECK(
      cudaMemcpy(positions, host_positions.data(), host_positions.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  const kernels::DecodeAttentionParams params{.out = o,
                                              .qkv = q,
                                              .k_cache = k,
                                              .v_cache = v,
                                              .positions = positions,
                                              .shape = s,
                                              .workspace = workspace,
                                              .workspace_bytes = workspace_bytes};

  cuda::Stream stream;
  bench::GraphReplayTimer timer(
      stream, calls, [&](cudaStream_t st, int) { kernels::decode_attention_forward(st, params); },
      "decode_attention_bench");
  timer.warm(warmup);
  cuda::Event start(true), stop(true);
  for (int i = 0; i < iters; ++i) timer.time_once(start, stop);
  for (void* p : std::initializer_list<void*>{k, v, q, o, workspace, positions}) SG_CUDA_CHECK(cudaFree(p));
  return {timer.median_us(), static_cast<double>(slots * s.kv_heads * keys * s.head_dim * 2 * 2)};
}

}  // namespace

int main(int argc, char** argv) {
  const bench::ToolArgs args = bench::read_tool_args(
      argc, argv,
      {.program = "decode_attention_bench",
       .about = "Times KV-cache attention alone (kernels/decode_attention.h) at the shapes of\n"
                "bench/generate_reference.py's models: decoding steps of batch 1 and 8 at the last position of a\n"
                "256- and a 4096-position cache, and a 128-token prefill. Each call inside a CUDA graph of --calls\n"
                "launches; the median replay over --iters (CUDA events) after --warmup, divided by --calls. Prints a\n"
                "table; writes nothing. Needs a CUDA GPU.",
       .flags = bench::graph_replay_flags()});
  const auto [iters, warmup, calls] = bench::graph_replay_counts(args);
  // name, T, rows per slot, heads, KV heads, head_dim, capacity
  const Shape shapes[] = {
      {"llama_1b decode b1", 1, 1, 16, 16, 128, 256},       {"llama_1b decode b8", 8, 1, 16, 16, 128, 256},
      {"llama_1b decode b1", 1, 1, 16, 16, 128, 4096},      {"llama_1b decode b8", 8, 1, 16, 16, 128, 4096},
      {"llama_1b prefill 128", 128, 128, 16, 16, 128, 256}, {"mixtral_small decode b1", 1, 1, 12, 4, 64, 256},
      {"mixtral_small decode b8", 8, 1, 12, 4, 64, 256},    {"nemotron_h_small decode b1", 1, 1, 8, 2, 128, 256},
      {"nemotron_h_small decode b8", 8, 1, 8, 2, 128, 256}, {"nemotron_h_small decode b8", 8, 1, 8, 2, 128, 4096}};
  try {
    std::printf("decode_attention_forward, median of %d graph replays of %d calls after %d warmup\n", iters, calls,
                warmup);
    std::printf("| shape | rows | heads / kv | head_dim | capacity | us per call | KV MB | GB/s |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    for (const Shape& shape : shapes) {
      const Timing t = bench_shape(shape, warmup, iters, calls);
      std::printf("| %s | %lld | %lld / %lld | %lld | %lld | %.2f | %.2f | %.0f |\n", shape.name,
                  static_cast<long long>(shape.T), static_cast<long long>(shape.heads),
                  static_cast<long long>(shape.kv_heads), static_cast<long long>(shape.head_dim),
                  static_cast<long long>(shape.capacity), t.us_per_call, t.kv_bytes / 1e6,
                  t.kv_bytes / (t.us_per_call * 1e3));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode_attention_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}

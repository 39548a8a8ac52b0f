// GPU KV-cache attention (kernels/decode_attention.h) against reference/decode_attention on the same
// bf16-rounded inputs: a prompt prefilled into one slot (T = P rows, up to 2100 positions: several
// 1024-key chunks), then one decoding row per slot at each slot's own position. kv_cache_append copies
// bf16 values exactly (bitwise), attention outputs within kBf16RelTol (bf16 output of an fp32
// computation), outputs poisoned first, a second run bitwise identical; a position outside the cache
// gives NaN and writes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/decode_attention.h"
#include "reference/decode_attention.h"

namespace {

using namespace sg;
using namespace sg::test;

void sync() {
  SG_CUDA_CHECK(cudaDeviceSynchronize());
}

struct Shape {
  int64_t slots, capacity, heads, kv_heads, d, prompt;
};
// d = 36 and 100: not a multiple of 8 (scalar loads); prompts of 2100 and 1030 tokens: several 1024-key
// chunks (the reference is O(P^2): the sizes keep it to about a second).
const Shape kShapes[] = {{1, 8, 2, 1, 64, 1},    {2, 2200, 4, 2, 128, 2100}, {3, 200, 4, 4, 36, 150},
                         {4, 70, 16, 2, 96, 64}, {2, 40, 6, 3, 100, 17},     {1, 1100, 4, 1, 256, 1030}};

class DecodeAttentionGpu : public ::testing::TestWithParam<Shape> {};

TEST_P(DecodeAttentionGpu, PrefillThenDecodeMatchReference) {
  const Shape sh = GetParam();
  ref::DecodeAttentionShape s{
      .slots = sh.slots, .capacity = sh.capacity, .heads = sh.heads, .kv_heads = sh.kv_heads, .head_dim = sh.d};
  const int64_t W = s.qkv_width(), cache = sh.slots * sh.kv_heads * sh.capacity * sh.d;
  std::vector<float> k_ref(cache, 0.0f), v_ref(cache, 0.0f);
  DeviceBuffer<bf16> d_k(cache), d_v(cache);
  d_k.upload(to_bf16(k_ref));
  d_v.upload(to_bf16(v_ref));
  cuda::Stream stream;

  // Prefill every slot with a prompt of its own length (slot b: prompt - b tokens, at least 1).
  std::vector<int32_t> lengths(sh.slots);
  for (int64_t b = 0; b < sh.slots; ++b) {
    const int64_t P = std::max<int64_t>(1, sh.prompt - b);
    lengths[b] = static_cast<int32_t>(P);
    const auto qkv = round_bf16(random_normal(P * W, 10 + b + sh.d));
    std::vector<int32_t> positions(P);
    std::iota(positions.begin(), positions.end(), 0);
    s.T = P;
    s.rows_per_slot = P;
    s.first_slot = b;
    std::vector<float> out_ref(P * sh.heads * sh.d);
    ref::kv_cache_append(k_ref.data(), v_ref.data(), qkv.data(), positions.data(), s);
    ref::decode_attention_forward(out_ref.data(), qkv.data(), k_ref.data(), v_ref.data(), positions.data(), s);

    DeviceBuffer<bf16> d_qkv(P * W), d_out(P * sh.heads * sh.d);
    DeviceBuffer<int32_t> d_pos(P);
    d_qkv.upload(to_bf16(qkv));
    d_pos.upload(positions);
    d_out.poison();
    kernels::kv_cache_append(
        stream, {.k_cache = d_k.get(), .v_cache = d_v.get(), .qkv = d_qkv.get(), .positions = d_pos.get(), .shape = s});
    kernels::decode_attention_forward(stream, {.out = d_out.get(),
                                               .qkv = d_qkv.get(),
                                               .k_cache = d_k.get(),
                                               .v_cache = d_v.get(),
                                               .positions = d_pos.get(),
                                               .shape = s});
    sync();
    const auto out = d_out.download();
    EXPECT_LT(relative_error(to_float(out), out_ref), kBf16RelTol) << "prefill of slot " << b;
    // Bitwise repeatable.
    d_out.poison();
    kernels::decode_attention_forward(stream, {.out = d_out.get(),
                                               .qkv = d_qkv.get(),
                                               .k_cache = d_k.get(),
                                               .v_cache = d_v.get(),
                                               .positions = d_pos.get(),
                                               .shape = s});
    sync();
    const auto again = d_out.download();
    EXPECT_EQ(std::memcmp(out.data(), again.data(), out.size() * sizeof(bf16)), 0) << "second run differs";
  }
  // The cache holds exactly the appended bf16 values (and zeros elsewhere).
  EXPECT_EQ(to_float(d_k.download()), k_ref);
  EXPECT_EQ(to_float(d_v.download()), v_ref);

  // One decoding row per slot, each at its own next position.
  s.T = sh.slots;
  s.rows_per_slot = 1;
  s.first_slot = 0;
  const auto rows = round_bf16(random_normal(sh.slots * W, 99 + sh.d));
  std::vector<float> out_ref(sh.slots * sh.heads * sh.d);
  ref::kv_cache_append(k_ref.data(), v_ref.data(), rows.data(), lengths.data(), s);
  ref::decode_attention_forward(out_ref.data(), rows.data(), k_ref.data(), v_ref.data(), lengths.data(), s);
  DeviceBuffer<bf16> d_rows(sh.slots * W), d_out(sh.slots * sh.heads * sh.d);
  DeviceBuffer<int32_t> d_pos(sh.slots);
  d_rows.upload(to_bf16(rows));
  d_pos.upload(lengths);
  d_out.poison();
  kernels::kv_cache_append(
      stream, {.k_cache = d_k.get(), .v_cache = d_v.get(), .qkv = d_rows.get(), .positions = d_pos.get(), .shape = s});
  kernels::decode_attention_forward(stream, {.out = d_out.get(),
                                             .qkv = d_rows.get(),
                                             .k_cache = d_k.get(),
                                             .v_cache = d_v.get(),
                                             .positions = d_pos.get(),
                                             .shape = s});
  sync();
  EXPECT_LT(relative_error(to_float(d_out.download()), out_ref), kBf16RelTol) << "decoding step";
  EXPECT_EQ(to_float(d_k.download()), k_ref);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeAttentionGpu, ::testing::ValuesIn(kShapes), [](const auto& info) {
  const Shape& s = info.param;
  return strprintf("slots%lld_cap%lld_h%lld_kv%lld_d%lld_P%lld", static_cast<long long>(s.slots),
                   static_cast<long long>(s.capacity), static_cast<long long>(s.heads),
                   static_cast<long long>(s.kv_heads), static_cast<long long>(s.d), static_cast<long long>(s.prompt));
});

TEST(DecodeAttentionGpuMisc, PositionOutsideTheCacheGivesNanAndNoWrite) {
  const ref::DecodeAttentionShape s{.T = 3, .slots = 3, .capacity = 16, .heads = 4, .kv_heads = 2, .head_dim = 64};
  const int64_t W = s.qkv_width(), cache = 3 * 2 * 16 * 64;
  DeviceBuffer<bf16> d_k(cache), d_v(cache), d_qkv(3 * W), d_out(3 * 4 * 64);
  DeviceBuffer<int32_t> d_pos(3);
  d_k.upload(to_bf16(std::vector<float>(cache, 0.0f)));
  d_v.upload(to_bf16(std::vector<float>(cache, 0.0f)));
  d_qkv.upload(to_bf16(random_normal(3 * W, 5)));
  d_pos.upload({-1, 16, 1 << 30});
  d_out.upload(to_bf16(std::vector<float>(3 * 4 * 64, 0.0f)));
  cuda::Stream stream;
  kernels::kv_cache_append(
      stream, {.k_cache = d_k.get(), .v_cache = d_v.get(), .qkv = d_qkv.get(), .positions = d_pos.get(), .shape = s});
  kernels::decode_attention_forward(stream, {.out = d_out.get(),
                                             .qkv = d_qkv.get(),
                                             .k_cache = d_k.get(),
                                             .v_cache = d_v.get(),
                                             .positions = d_pos.get(),
                                             .shape = s});
  sync();
  for (float x : to_float(d_k.download())) ASSERT_EQ(x, 0.0f);
  for (float x : to_float(d_out.download())) ASSERT_TRUE(std::isnan(x));
}

TEST(DecodeAttentionGpuMisc, RejectsBadParams) {
  ref::DecodeAttentionShape s{
      .T = 1, .slots = 1, .capacity = 4, .heads = 2, .kv_heads = 1, .head_dim = 512};  // above the kernel's 256
  DeviceBuffer<bf16> b(4096);
  DeviceBuffer<int32_t> pos(1);
  cuda::Stream stream;
  EXPECT_THROW(
      kernels::decode_attention_forward(
          stream,
          {.out = b.get(), .qkv = b.get(), .k_cache = b.get(), .v_cache = b.get(), .positions = pos.get(), .shape = s}),
      Error);
  s.head_dim = 64;
  EXPECT_THROW(
      kernels::decode_attention_forward(
          stream,
          {.out = b.get(), .qkv = b.get(), .k_cache = b.get(), .v_cache = b.get(), .positions = nullptr, .shape = s}),
      Error);
}

}  // namespace

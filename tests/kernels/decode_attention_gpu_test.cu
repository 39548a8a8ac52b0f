// GPU KV-cache attention (kernels/decode_attention.h) on decode_attention_case.h's scenario (prefills, then a
// decoding step; one split and many), outputs and workspace poisoned first, a second run bitwise identical; a
// position outside the cache gives NaN and writes nothing, with one split and with several. The host-side
// checks are tested on the CPU (decode_attention_emulated_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/decode_attention.h"
#include "kernels/decode_attention_case.h"
#include "reference/decode_attention.h"

namespace {

using namespace sg;
using namespace sg::test;

void sync() {
  SG_CUDA_CHECK(cudaDeviceSynchronize());
}

// The GPU side of decode_attention_case.h: outputs poisoned before each run, and each attention run twice
// (poisoned again), bitwise identical.
class GpuBackend {
 public:
  explicit GpuBackend(const sg::test::DecodeAttentionCase& c)
      : cache_(c.slots * c.kv_heads * c.capacity * c.d),
        workspace_bytes_(kernels::decode_attention_workspace_bytes(c.d)),
        k_(cache_),
        v_(cache_),
        workspace_(workspace_bytes_) {
    k_.upload(to_bf16(std::vector<float>(cache_, 0.0f)));
    v_.upload(to_bf16(std::vector<float>(cache_, 0.0f)));
  }
  std::vector<float> run(const std::vector<float>& qkv, const std::vector<int32_t>& positions,
                         const ref::DecodeAttentionShape& s) {
    DeviceBuffer<bf16> d_qkv(qkv.size()), d_out(s.T * s.heads * s.head_dim);
    DeviceBuffer<int32_t> d_pos(positions.size());
    d_qkv.upload(to_bf16(qkv));
    d_pos.upload(positions);
    kernels::kv_cache_append(
        stream_, {.k_cache = k_.get(), .v_cache = v_.get(), .qkv = d_qkv.get(), .positions = d_pos.get(), .shape = s});
    std::vector<bf16> first;
    for (int run = 0; run < 2; ++run) {
      d_out.poison();
      workspace_.poison();
      kernels::decode_attention_forward(stream_, {.out = d_out.get(),
                                                  .qkv = d_qkv.get(),
                                                  .k_cache = k_.get(),
                                                  .v_cache = v_.get(),
                                                  .positions = d_pos.get(),
                                                  .shape = s,
                                                  .workspace = workspace_.get(),
                                                  .workspace_bytes = workspace_bytes_});
      sync();
      const auto out = d_out.download();
      if (run == 0) first = out;
      if (run == 1) EXPECT_EQ(std::memcmp(out.data(), first.data(), out.size() * sizeof(bf16)), 0) << "rerun differs";
    }
    return to_float(first);
  }
  std::pair<std::vector<float>, std::vector<float>> caches() {
    return {to_float(k_.download()), to_float(v_.download())};
  }

 private:
  int64_t cache_;
  size_t workspace_bytes_;
  DeviceBuffer<bf16> k_, v_;
  DeviceBuffer<unsigned char> workspace_;
  cuda::Stream stream_;
};

// d = 36 and 100: not a multiple of 8 (element-by-element tile loads); prompts of 2100, 1030 and 260 tokens: one
// split of many tiles (their prefills: over kDecodeAttentionMaxPartials / 2 pairs) and a split per tile, the last
// ones past the row's position (their decoding steps); cap200_d36: prefills of 4 splits of 2 tiles; h16_kv2 and
// h8_kv1_d256: 8 query heads a block (h8_kv1_d256: 16 accumulators a thread, the most); h12_kv1: 2 blocks of 6
// query heads per KV head (the reference is O(P^2): the sizes keep it to about a second).
const sg::test::DecodeAttentionCase kShapes[] = {
    {1, 8, 2, 1, 64, 1},    {2, 2200, 4, 2, 128, 2100}, {3, 200, 4, 4, 36, 150},   {4, 70, 16, 2, 96, 64},
    {2, 40, 6, 3, 100, 17}, {1, 1100, 4, 1, 256, 1030}, {2, 300, 12, 1, 128, 260}, {1, 100, 8, 1, 256, 90}};

class DecodeAttentionGpu : public ::testing::TestWithParam<sg::test::DecodeAttentionCase> {};

TEST_P(DecodeAttentionGpu, PrefillThenDecodeMatchReference) {
  GpuBackend backend(GetParam());
  sg::test::check_decode_attention_case(GetParam(), backend);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeAttentionGpu, ::testing::ValuesIn(kShapes), [](const auto& info) {
  const sg::test::DecodeAttentionCase& s = info.param;
  return strprintf("slots%lld_cap%lld_h%lld_kv%lld_d%lld_P%lld", static_cast<long long>(s.slots),
                   static_cast<long long>(s.capacity), static_cast<long long>(s.heads),
                   static_cast<long long>(s.kv_heads), static_cast<long long>(s.d), static_cast<long long>(s.prompt));
});

// Capacity 16: one split per (row, head); 256: eight, merged by the second kernel, which writes the NaN.
TEST(DecodeAttentionGpuMisc, PositionOutsideTheCacheGivesNanAndNoWrite) {
  for (const int64_t capacity : {16, 256}) {
    const ref::DecodeAttentionShape s{
        .T = 3, .slots = 3, .capacity = capacity, .heads = 4, .kv_heads = 2, .head_dim = 64};
    const int64_t W = s.qkv_width(), cache = 3 * 2 * capacity * 64;
    DeviceBuffer<bf16> d_k(cache), d_v(cache), d_qkv(3 * W), d_out(3 * 4 * 64);
    DeviceBuffer<int32_t> d_pos(3);
    DeviceBuffer<unsigned char> workspace(kernels::decode_attention_workspace_bytes(64));
    d_k.upload(to_bf16(std::vector<float>(cache, 0.0f)));
    d_v.upload(to_bf16(std::vector<float>(cache, 0.0f)));
    d_qkv.upload(to_bf16(random_normal(3 * W, 5)));
    d_pos.upload({-1, static_cast<int32_t>(capacity), 1 << 30});
    d_out.upload(to_bf16(std::vector<float>(3 * 4 * 64, 0.0f)));
    cuda::Stream stream;
    kernels::kv_cache_append(
        stream, {.k_cache = d_k.get(), .v_cache = d_v.get(), .qkv = d_qkv.get(), .positions = d_pos.get(), .shape = s});
    kernels::decode_attention_forward(stream, {.out = d_out.get(),
                                               .qkv = d_qkv.get(),
                                               .k_cache = d_k.get(),
                                               .v_cache = d_v.get(),
                                               .positions = d_pos.get(),
                                               .shape = s,
                                               .workspace = workspace.get(),
                                               .workspace_bytes = kernels::decode_attention_workspace_bytes(64)});
    sync();
    for (float x : to_float(d_k.download())) ASSERT_EQ(x, 0.0f) << "capacity " << capacity;
    for (float x : to_float(d_out.download())) ASSERT_TRUE(std::isnan(x)) << "capacity " << capacity;
  }
}

}  // namespace

// The tiled RoPE kernel (src/kernels/rope.cuh), run on the CPU by tests/simt_emulator.h with the launchers'
// own checks and dispatch: bit for bit the per-element kernel (rope_per_element.cuh, emulated too) and
// within kBf16RelTol of reference/rope, with everything outside the rotated heads untouched (rope_case.h).
// Small shapes (the emulator is slow) covering both paths (16-byte vectors, scalar), T = 0, GQA, several
// passes per tile, the table-capped tile, device positions with Llama 3 scaling, LongRoPE, and a grid smaller than
// the tile count (the tile-stride loop, reusing the block's inv_freq table). The same shapes (those with
// positions t % S) through the cos/sin table (rope_table_build, emulated too), and the table's checks.
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <vector>

#include "kernels/rope.cuh"
#include "rope_case.h"
#include "rope_per_element.cuh"

namespace sg {
namespace {

using test::RopeCase;
using test::RopeShape;

const RopeShape kShapes[] = {
    {1, 1, 2, 1, 64},
    {7, 3, 4, 2, 128},
    {37, 10, 8, 2, 64, 500000.0},       // odd T, GQA 4:1: several rows per tile, a partial last tile
    {5, 5, 1, 1, 6},                    // head_dim 6: scalar path
    {9, 9, 6, 2, 80},                   // head_dim 80
    {13, 7, 7, 1, 72},                  // head_dim 72: scalar path
    {0, 16, 4, 2, 128},                 // T = 0
    {11, 5, 4, 2, 64, 10000.0, 1},      // odd row stride: scalar path
    {6, 6, 2, 1, 128, 10000.0, 8, 5},   // padded rows, x not 16-byte aligned: scalar path
    {70, 35, 1, 1, 128},                // one head: the table caps the tile at 32 rows
    {2, 2, 96, 32, 128},                // a row wider than one pass (1024 chunks, 512 per pass)
    {2, 2, 16, 4, 64, 10000.0, 0, 0, false, false},
    {1, 1, 1, 1, 4096},                 // the largest head_dim
    {23, 1, 4, 2, 128, 500000.0, 0, 0, true, true},  // decoding positions, Llama 3 scaling
    {17, 1, 3, 1, 72, 10000.0, 0, 0, true, false},   // decoding positions, scalar path
    {29, 14, 4, 2, 128, 500000.0, 0, 0, false, true},  // Llama 3 scaling, positions t % S (the table too)
    // Partial rotary: the first rotary_dim dimensions of each head rotated, the rest passed through.
    {9, 9, 4, 2, 128, 10000.0, 0, 0, false, false, 96},     // Phi-4-mini's 96 of 128: 16-byte chunks
    {7, 7, 3, 1, 64, 10000.0, 0, 0, false, false, 24},      // 12 pairs: scalar path
    {5, 5, 2, 2, 6, 10000.0, 0, 0, false, false, 2},        // one pair of a head of 6
    {11, 1, 4, 2, 128, 500000.0, 0, 0, true, true, 64},     // decoding positions, Llama 3 scaling
    {6, 6, 2, 1, 64, 10000.0, 8, 5, false, false, 32},      // padded rows, x not 16-byte aligned
    // LongRoPE: a factor per pair, cos and sin scaled (Phi-4-mini's 96 of 128; Phi-3.5-mini's heads of 96).
    {9, 9, 4, 2, 128, 10000.0, 0, 0, false, false, 96, true},
    {17, 1, 3, 1, 96, 10000.0, 0, 0, true, false, 0, true},   // decoding positions
    {7, 7, 3, 1, 64, 10000.0, 0, 0, false, false, 24, true},  // scalar path
};

std::vector<bf16> run_per_element(const RopeCase& c, bool inverse) {
  std::vector<bf16> x = c.input;
  test::rope_per_element::run(emu::Launch{}, c.params(x.data(), c.positions.data()), inverse);
  return x;
}

class RopeEmulated : public ::testing::TestWithParam<RopeShape> {};

TEST_P(RopeEmulated, MatchesPerElementKernelBitwiseAndReference) {
  const RopeCase c = test::make_rope_case(GetParam());
  for (const bool inverse : {false, true}) {
    std::vector<bf16> x = c.input;
    const kernels::RopeParams p = c.params(x.data(), c.positions.data());
    if (inverse) {
      kernels::rope::run_backward(emu::Launch{}, p);
    } else {
      kernels::rope::run_forward(emu::Launch{}, p);
    }
    test::expect_rope_result(c, x, run_per_element(c, inverse), inverse);
  }
}

// The table path (the training step's): the table built by the emulated table kernel, near the reference
// table, then every rotation bit for bit the per-element kernel's, as the computed path.
TEST_P(RopeEmulated, TablePathMatchesPerElementKernelBitwise) {
  if (GetParam().device_positions) GTEST_SKIP() << "a table serves positions t % S only";
  const RopeCase c = test::make_rope_case(GetParam());
  std::vector<float> storage(c.table_floats(), NAN);
  ASSERT_TRUE(kernels::detail::is_aligned(storage.data(), 16));
  const kernels::RopeTable table = kernels::rope::run_table_build(emu::Launch{}, c.table_params(storage.data()));
  test::expect_table_near_reference(c, storage);
  for (const bool inverse : {false, true}) {
    std::vector<bf16> x = c.input;
    kernels::RopeParams p = c.params(x.data(), nullptr);
    p.table = table;
    if (inverse) {
      kernels::rope::run_backward(emu::Launch{}, p);
    } else {
      kernels::rope::run_forward(emu::Launch{}, p);
    }
    test::expect_rope_result(c, x, run_per_element(c, inverse), inverse);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeEmulated, ::testing::ValuesIn(kShapes),
                         [](const auto& info) { return test::rope_shape_name(info.param); });

// The launcher never launches fewer blocks than tiles below 2^16 tiles; launched directly with 3 blocks for
// 12 or more tiles, each block walks several tiles, computing inv_freq once and the cos/sin table per tile
// (or, from a table, each tile's first position anew).
TEST(RopeEmulatedMisc, FewerBlocksThanTilesStrideOverTiles) {
  using kernels::detail::kBf16PerVec;
  for (const bool from_table : {false, true}) {
    for (const bool vector_path : {true, false}) {
      const RopeCase c = test::make_rope_case({45, 20, 8, 2, vector_path ? 128 : 72, 10000.0});
      std::vector<bf16> x = c.input;
      std::vector<float> storage(c.table_floats());
      const emu::Launch launch;
      kernels::rope::Args a{.p = c.params(x.data(), nullptr)};
      if (from_table) a.p.table = kernels::rope::run_table_build(launch, c.table_params(storage.data()));
      a.rows_per_tile = kernels::rope::rows_per_tile(a.p, vector_path ? kBf16PerVec : 1);
      a.num_tiles = kernels::detail::ceil_div(c.s.T, a.rows_per_tile);
      a.grid_blocks = 3;
      ASSERT_GT(a.num_tiles, 2 * a.grid_blocks) << "the case must give every block several tiles";
      const size_t smem = kernels::rope::shared_bytes(a.p, a.rows_per_tile);
      if (from_table) {
        ASSERT_EQ(smem, 0u);
        if (vector_path) {
          launch("rope_kernel", kernels::rope::rope_kernel<kBf16PerVec, false, true>, dim3(3), 256, smem, a);
        } else {
          launch("rope_kernel", kernels::rope::rope_kernel<1, false, true>, dim3(3), 256, smem, a);
        }
      } else if (vector_path) {
        launch("rope_kernel", kernels::rope::rope_kernel<kBf16PerVec, false, false>, dim3(3), 256, smem, a);
      } else {
        launch("rope_kernel", kernels::rope::rope_kernel<1, false, false>, dim3(3), 256, smem, a);
      }
      test::expect_rope_result(c, x, run_per_element(c, false), false);
    }
  }
}

// A table serves only the params it was built for: positions t % S with S <= its length, the same
// head_dim, base and scaling; the builder rejects bad shapes and unaligned storage.
TEST(RopeEmulatedMisc, RejectsTablesThatDoNotServeTheParams) {
  const emu::Launch launch;
  std::vector<bf16> x(4 * 64);
  std::vector<float> storage(8 * 64 + 4);
  const kernels::RopeTableParams tp{.cos_sin = storage.data(), .positions = 8, .head_dim = 64, .base = 10000.0};
  const kernels::RopeTable table = kernels::rope::run_table_build(launch, tp);
  const kernels::RopeParams good{
      .x = x.data(), .T = 4, .S = 8, .num_heads = 1, .head_dim = 64, .row_stride = 64, .base = 10000.0, .table = table};
  EXPECT_NO_THROW(kernels::rope::run_forward(launch, good));
  const int32_t positions[4] = {0, 1, 2, 3};
  auto with = [&](auto change) {
    kernels::RopeParams p = good;
    change(p);
    return test::thrown_message([&] { kernels::rope::run_forward(launch, p); });
  };
  EXPECT_NE(with([&](kernels::RopeParams& p) { p.positions = positions; }).find("cos/sin table"), std::string::npos);
  EXPECT_NE(with([](kernels::RopeParams& p) { p.S = 9; }).find("S <= its positions"), std::string::npos);
  EXPECT_NE(with([](kernels::RopeParams& p) { p.head_dim = 32; }).find("cos/sin table"), std::string::npos);
  EXPECT_NE(with([](kernels::RopeParams& p) { p.base = 500000.0; }).find("cos/sin table"), std::string::npos);
  EXPECT_NE(with([](kernels::RopeParams& p) { p.scaling.factor = 8.0; }).find("cos/sin table"), std::string::npos);
  // LongRoPE's factors and attention factor are part of the scaling a table was built for.
  {
    kernels::RopeTableParams lp = tp;
    lp.scaling.longrope_pairs = 32;
    for (int i = 0; i < 32; ++i) lp.scaling.longrope_factors[i] = 1.0f + static_cast<float>(i);
    kernels::RopeParams p = good;
    p.table = kernels::rope::run_table_build(launch, lp);
    p.scaling = lp.scaling;
    EXPECT_NO_THROW(kernels::rope::run_forward(launch, p));
    p.scaling.longrope_factors[31] = 2.0f;
    EXPECT_NE(test::thrown_message([&] { kernels::rope::run_forward(launch, p); }).find("cos/sin table"),
              std::string::npos);
    p.scaling = lp.scaling;
    p.scaling.attention_factor = 1.5;
    EXPECT_NE(test::thrown_message([&] { kernels::rope::run_forward(launch, p); }).find("cos/sin table"),
              std::string::npos);
  }
  // A table of 64 rotated dimensions serves a head of 128 rotating 64, not one of 64 rotating 32.
  EXPECT_NE(with([](kernels::RopeParams& p) { p.rotary_dim = 32; }).find("cos/sin table"), std::string::npos);
  std::vector<bf16> wide(4 * 128);
  EXPECT_EQ(with([&](kernels::RopeParams& p) {
              p.x = wide.data();
              p.head_dim = p.row_stride = 128;
              p.rotary_dim = 64;
            }),
            "");
  EXPECT_NE(with([](kernels::RopeParams& p) { p.table.cos_sin += 1; }).find("16-byte"), std::string::npos);
  // The builder.
  auto build = [&](auto change) {
    kernels::RopeTableParams p = tp;
    change(p);
    return test::thrown_message([&] { kernels::rope::run_table_build(launch, p); });
  };
  EXPECT_NE(build([](kernels::RopeTableParams& p) { p.positions = 0; }).find("rope_table_build"), std::string::npos);
  EXPECT_NE(build([](kernels::RopeTableParams& p) { p.head_dim = 63; }).find("rope_table_build"), std::string::npos);
  EXPECT_NE(build([](kernels::RopeTableParams& p) { p.cos_sin += 1; }).find("aligned"), std::string::npos);
  EXPECT_EQ(kernels::rope::table_bytes(8, 64), 8u * 64u * sizeof(float));
}

TEST(RopeEmulatedMisc, RejectsBadShapes) {
  std::vector<bf16> x(64);
  const emu::Launch launch;
  using kernels::RopeParams;
  const RopeParams odd_head_dim{.x = x.data(), .T = 2, .S = 2, .num_heads = 1, .head_dim = 5, .row_stride = 5};
  const RopeParams stride_below_heads_times_d{
      .x = x.data(), .T = 2, .S = 2, .num_heads = 2, .head_dim = 8, .row_stride = 8};
  const RopeParams zero_seq_length{.x = x.data(), .T = 2, .S = 0, .num_heads = 1, .head_dim = 8, .row_stride = 8};
  const RopeParams head_dim_above_4096{
      .x = x.data(), .T = 1, .S = 1, .num_heads = 1, .head_dim = 4098, .row_stride = 4098};
  const RopeParams no_data{.x = nullptr, .T = 1, .S = 1, .num_heads = 1, .head_dim = 8, .row_stride = 8};
  EXPECT_THROW(kernels::rope::run_forward(launch, odd_head_dim), Error);
  EXPECT_THROW(kernels::rope::run_forward(launch, stride_below_heads_times_d), Error);
  EXPECT_THROW(kernels::rope::run_forward(launch, zero_seq_length), Error);
  EXPECT_THROW(kernels::rope::run_forward(launch, head_dim_above_4096), Error);
  EXPECT_THROW(kernels::rope::run_forward(launch, no_data), Error);
  for (const int64_t rotary_dim : {int64_t{-2}, int64_t{3}, int64_t{10}}) {  // negative, odd, over head_dim
    const RopeParams bad_rotary{
        .x = x.data(), .T = 2, .S = 2, .num_heads = 1, .head_dim = 8, .rotary_dim = rotary_dim, .row_stride = 8};
    const std::string message = test::thrown_message([&] { kernels::rope::run_forward(launch, bad_rotary); });
    EXPECT_NE(message.find("rotary_dim"), std::string::npos) << rotary_dim << ": " << message;
  }
  const RopeParams bad_scaling{.x = x.data(),
                               .T = 1,
                               .S = 1,
                               .num_heads = 1,
                               .head_dim = 8,
                               .row_stride = 8,
                               .scaling = {.factor = 8.0, .low_freq_factor = 4.0}};  // not below high_freq_factor
  const std::string message = test::thrown_message([&] { kernels::rope::run_backward(launch, bad_scaling); });
  EXPECT_NE(message.find("rope_backward"), std::string::npos) << message;
  EXPECT_NE(message.find("low_freq_factor"), std::string::npos) << message;
  RopeParams longrope_pairs_off = bad_scaling;
  longrope_pairs_off.scaling = {};
  longrope_pairs_off.scaling.longrope_pairs = 3;  // 8 rotated dimensions are 4 pairs
  for (int i = 0; i < 3; ++i) longrope_pairs_off.scaling.longrope_factors[i] = 1.0f;
  EXPECT_NE(test::thrown_message([&] { kernels::rope::run_forward(launch, longrope_pairs_off); })
                .find("LongRoPE has 3 factors but 8 dimensions are rotated"),
            std::string::npos);
}

}  // namespace
}  // namespace sg

// The Mamba2 decoding kernels (src/kernels/mamba_decode.cuh: the conv1d and the SSD scan continued from kept
// state), run on the CPU by tests/simt_emulator.h with the launchers' own checks and launch sequence, against
// the CPU twins called per slot: scenarios and tolerances in mamba_decode_case.h. Small shapes: the emulator
// is slow.
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <vector>

#include "core/strings.h"
#include "gpu_test_util.h"  // bf16 conversions only: nothing here touches a GPU
#include "kernels/mamba_decode.cuh"
#include "kernels/mamba_decode_case.h"

namespace sg {
namespace {

using test::ConvCall;
using test::ConvDecodeShape;
using test::ScanCall;
using test::ScanDecodeShape;

void run_conv(const ConvCall& c) {
  kernels::mamba_decode::run_conv(emu::Launch{},
                                  c.params(c.out.data(), c.state.data(), c.in.data(), c.weight.data(), c.bias.data()));
}

void run_scan(const ScanCall& c) {
  kernels::mamba_decode::run_scan(
      emu::Launch{}, c.params(c.y.data(), c.state.data(), c.x.data(), c.dt.data(), c.A.data(), c.Bm.data(), c.Cm.data(),
                              c.D != nullptr ? c.D->data() : nullptr));
}

const ConvDecodeShape kConvShapes[] = {
    {{37, 37, 2, 4}, 40, 40, 0},   // a prompt's prefill into slot 2 of 4, packed
    {{5, 1, 0, 5}, 20, 29, 3},     // a decoding step of 5 slots, C % 8 != 0, strided
    {{10, 4, 1, 5}, 300, 310, 7},  // 3 sequences (4, 4, 2 rows) from slot 1, two blocks of threads
    {{2, 2, 1, 2}, 8, 8, 0},       // fewer rows than the window: the new state keeps a kept input
};

const ScanDecodeShape kScanShapes[] = {
    {{37, 37, 2, 4}, 2, 64, 1, 16, 0, true},  // a prefill into slot 2 of 4: 3 stages of rows, packed
    {{3, 1, 0, 3}, 4, 64, 2, 128, 5, false},  // a decoding step of 3 slots, strided, no D
    {{10, 4, 1, 5}, 2, 10, 2, 64, 2, true},   // 3 sequences (4, 4, 2 rows); headdim 10: idle threads
    {{1, 1, 0, 1}, 2, 64, 1, 32, 0, true},    // one row
};

class MambaDecodeConvEmulated : public ::testing::TestWithParam<ConvDecodeShape> {};

TEST_P(MambaDecodeConvEmulated, MatchesTheTwinPerSlot) {
  test::check_conv_case(GetParam(), run_conv);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MambaDecodeConvEmulated, ::testing::ValuesIn(kConvShapes), [](const auto& info) {
  const ConvDecodeShape& s = info.param;
  return strprintf("T%lld_per%lld_from%lld_of%lld_C%lld_stride%lld_at%lld", static_cast<long long>(s.rows.T),
                   static_cast<long long>(s.rows.rows_per_slot), static_cast<long long>(s.rows.first_slot),
                   static_cast<long long>(s.rows.slots), static_cast<long long>(s.C), static_cast<long long>(s.stride),
                   static_cast<long long>(s.offset));
});

class MambaDecodeScanEmulated : public ::testing::TestWithParam<ScanDecodeShape> {};

TEST_P(MambaDecodeScanEmulated, MatchesTheTwinPerSlot) {
  test::check_scan_case(GetParam(), run_scan);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MambaDecodeScanEmulated, ::testing::ValuesIn(kScanShapes), [](const auto& info) {
  const ScanDecodeShape& s = info.param;
  return strprintf("T%lld_per%lld_from%lld_of%lld_H%lld_P%lld_G%lld_N%lld_pad%lld%s", static_cast<long long>(s.rows.T),
                   static_cast<long long>(s.rows.rows_per_slot), static_cast<long long>(s.rows.first_slot),
                   static_cast<long long>(s.rows.slots), static_cast<long long>(s.nheads),
                   static_cast<long long>(s.headdim), static_cast<long long>(s.ngroups),
                   static_cast<long long>(s.dstate), static_cast<long long>(s.pad), s.with_D ? "_D" : "");
});

TEST(MambaDecodeEmulated, ConvInPiecesEqualsOneCallBitForBit) {
  test::check_conv_pieces(run_conv);
}

TEST(MambaDecodeEmulated, ScanInPiecesEqualsOneCallBitForBit) {
  test::check_scan_pieces({{}, 2, 64, 2, 16, 3, true}, run_scan);
}

TEST(MambaDecodeEmulated, EmptyCallsWriteNothing) {
  test::check_conv_noop(run_conv);
  test::check_scan_noop(run_scan);
}

TEST(MambaDecodeEmulated, BadParamsThrowNamingTheField) {
  std::vector<bf16> b(8);
  std::vector<float> f(8);
  test::check_bad_params([](const auto& p) { kernels::mamba_decode::run_conv(emu::Launch{}, p); },
                         [](const auto& p) { kernels::mamba_decode::run_scan(emu::Launch{}, p); }, b.data(), f.data());
}

}  // namespace
}  // namespace sg

// GPU Mamba2 decoding kernels (kernels/mamba_decode.h: the conv1d and the SSD scan continued from kept
// state) against the CPU twins called per slot, on the same bf16-rounded inputs: scenarios and tolerances in
// mamba_decode_case.h (a prompt's prefill into one slot, decoding steps of several slots, a slot fed in
// pieces equal bit for bit to one call, empty calls, bad parameters). Outputs are poisoned before every run;
// a second eager run and a CUDA-graph replay are bitwise identical (states re-uploaded before each).
#include <gtest/gtest.h>

#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernel_gpu_test_util.h"
#include "kernels/mamba_decode.h"
#include "kernels/mamba_decode_case.h"

namespace {

using namespace sg;
using namespace sg::test;

// One call's buffers on the device: prepare() uploads the call's out / y (poisoned) and starting state.
struct GpuConv {
  const ConvCall& c;
  DeviceBuffer<bf16> in{c.in.size()}, weight{c.weight.size()}, bias{c.bias.size()}, out{c.out.size()},
      state{c.state.size()};
  explicit GpuConv(const ConvCall& call) : c(call) {
    in.upload(c.in);
    weight.upload(c.weight);
    bias.upload(c.bias);
  }
  void prepare() {
    out.upload(c.out);
    state.upload(c.state);
  }
  void enqueue(cudaStream_t st) {
    kernels::causal_conv1d_silu_continued(st, c.params(out.get(), state.get(), in.get(), weight.get(), bias.get()));
  }
  Snapshot snapshot() const { return {named_bytes("out", out.download()), named_bytes("state", state.download())}; }
};

struct GpuScan {
  const ScanCall& c;
  DeviceBuffer<bf16> x{c.x.size()}, Bm{c.Bm.size()}, Cm{c.Cm.size()}, y{c.y.size()};
  DeviceBuffer<float> dt{c.dt.size()}, A{c.A.size()}, D{c.D != nullptr ? c.D->size() : 0}, state{c.state.size()};
  explicit GpuScan(const ScanCall& call) : c(call) {
    x.upload(c.x);
    Bm.upload(c.Bm);
    Cm.upload(c.Cm);
    dt.upload(c.dt);
    A.upload(c.A);
    if (c.D != nullptr) D.upload(*c.D);
  }
  void prepare() {
    y.upload(c.y);
    state.upload(c.state);
  }
  void enqueue(cudaStream_t st) {
    kernels::ssd_scan_continued(st, c.params(y.get(), state.get(), x.get(), dt.get(), A.get(), Bm.get(), Cm.get(),
                                             c.D != nullptr ? D.get() : nullptr));
  }
  Snapshot snapshot() const { return {named_bytes("y", y.download()), named_bytes("state", state.download())}; }
};

// Runs the call, checks that an eager rerun and a CUDA-graph replay (each from the same starting state)
// give the same bits, and leaves the results in the call's host buffers.
void run_conv(const ConvCall& c) {
  GpuConv g(c);
  cuda::Stream stream;
  g.prepare();
  g.enqueue(stream);
  sync_device();
  const Snapshot first = g.snapshot();
  expect_bitwise_repeatable(
      stream, [&] { g.prepare(); }, [&](cudaStream_t st) { g.enqueue(st); }, [&] { return g.snapshot(); }, first);
  c.out = g.out.download();
  c.state = g.state.download();
}

void run_scan(const ScanCall& c) {
  GpuScan g(c);
  cuda::Stream stream;
  g.prepare();
  g.enqueue(stream);
  sync_device();
  const Snapshot first = g.snapshot();
  expect_bitwise_repeatable(
      stream, [&] { g.prepare(); }, [&](cudaStream_t st) { g.enqueue(st); }, [&] { return g.snapshot(); }, first);
  c.y = g.y.download();
  c.state = g.state.download();
}

const ConvDecodeShape kConvShapes[] = {
    {{2000, 2000, 1, 3}, 6144, 10304, 4096},  // a long prompt's prefill; in_proj row [z 4096 | xBC 6144 | dt 64]
    {{64, 1, 0, 64}, 6144, 10304, 4096},      // a decoding step of 64 sequences, same rows
    {{37, 37, 2, 4}, 20, 29, 3},              // a prefill into slot 2 of 4, C % 8 != 0, strided
    {{10, 4, 1, 5}, 300, 310, 7},             // 3 sequences (4, 4, 2 rows) from slot 1
    {{2, 2, 1, 2}, 8, 8, 0},                  // fewer rows than the window, packed
};

const ScanDecodeShape kScanShapes[] = {
    {{2000, 2000, 1, 3}, 16, 64, 8, 128, 4, true},  // a long prompt's prefill: 125 stages of rows
    {{64, 1, 0, 64}, 64, 64, 8, 128, 4, true},      // a decoding step of 64 sequences, Nemotron-H-like heads
    {{37, 37, 2, 4}, 4, 64, 1, 16, 0, false},       // a prefill into slot 2 of 4, packed, no D
    {{100, 40, 0, 3}, 3, 128, 1, 64, 0, true},      // headdim 128 (512 threads), 3 sequences (40, 40, 20)
    {{5, 1, 0, 5}, 2, 7, 2, 32, 3, true},           // headdim 7: idle threads in the block's only warp
};

class MambaDecodeConvGpu : public ::testing::TestWithParam<ConvDecodeShape> {};

TEST_P(MambaDecodeConvGpu, MatchesTheTwinPerSlotAndIsDeterministic) {
  check_conv_case(GetParam(), run_conv);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MambaDecodeConvGpu, ::testing::ValuesIn(kConvShapes), [](const auto& info) {
  const ConvDecodeShape& s = info.param;
  return strprintf("T%lld_per%lld_from%lld_of%lld_C%lld_stride%lld_at%lld", static_cast<long long>(s.rows.T),
                   static_cast<long long>(s.rows.rows_per_slot), static_cast<long long>(s.rows.first_slot),
                   static_cast<long long>(s.rows.slots), static_cast<long long>(s.C), static_cast<long long>(s.stride),
                   static_cast<long long>(s.offset));
});

class MambaDecodeScanGpu : public ::testing::TestWithParam<ScanDecodeShape> {};

TEST_P(MambaDecodeScanGpu, MatchesTheTwinPerSlotAndIsDeterministic) {
  check_scan_case(GetParam(), run_scan);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MambaDecodeScanGpu, ::testing::ValuesIn(kScanShapes), [](const auto& info) {
  const ScanDecodeShape& s = info.param;
  return strprintf("T%lld_per%lld_from%lld_of%lld_H%lld_P%lld_G%lld_N%lld_pad%lld%s", static_cast<long long>(s.rows.T),
                   static_cast<long long>(s.rows.rows_per_slot), static_cast<long long>(s.rows.first_slot),
                   static_cast<long long>(s.rows.slots), static_cast<long long>(s.nheads),
                   static_cast<long long>(s.headdim), static_cast<long long>(s.ngroups),
                   static_cast<long long>(s.dstate), static_cast<long long>(s.pad), s.with_D ? "_D" : "");
});

TEST(MambaDecodeGpu, ConvInPiecesEqualsOneCallBitForBit) {
  check_conv_pieces(run_conv);
}

TEST(MambaDecodeGpu, ScanInPiecesEqualsOneCallBitForBit) {
  check_scan_pieces({{}, 8, 64, 2, 128, 3, true}, run_scan);
  check_scan_pieces({{}, 2, 64, 1, 16, 0, false}, run_scan);
}

TEST(MambaDecodeGpu, EmptyCallsWriteNothing) {
  check_conv_noop(run_conv);
  check_scan_noop(run_scan);
}

TEST(MambaDecodeGpu, BadParamsThrowNamingTheField) {
  DeviceBuffer<bf16> b(8);
  DeviceBuffer<float> f(8);
  cuda::Stream stream;
  check_bad_params([&](const auto& p) { kernels::causal_conv1d_silu_continued(stream, p); },
                   [&](const auto& p) { kernels::ssd_scan_continued(stream, p); }, b.get(), f.get());
}

}  // namespace

// GPU shared expert gate (kernels/moe_shared_gate.h) and its weight gradient (column_sums with row_scale) against the
// CPU twin (reference/moe_shared_gate) on the same bf16 inputs, at widths that are and are not multiples of 8 (1, 7,
// 100, 257, 4096 + 3) and up to 8192 tokens x 2048. Cases and tolerances: moe_shared_gate_case.h. The overwritten
// outputs (gate, d_shared, d_logit) and the scratch are poisoned before every run; the accumulated ones (out,
// d_input, d_weight) start from non-zero values. A second eager run and a CUDA-graph replay of the whole sequence
// (the backward on the forward's own gate) are bitwise identical; the same data one element past alignment (the
// scalar path) gives the bits of the 16-byte path; bad parameters throw naming the field.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernel_gpu_test_util.h"
#include "kernels/column_sums.h"
#include "kernels/moe_shared_gate.h"
#include "kernels/moe_shared_gate_case.h"

namespace {

using namespace sg;
using namespace sg::test;

const MoeSharedGateShape kShapes[] = {
    {0, 2048},     // nothing launched
    {1, 1},        // one element
    {1, 7},        // a partial chunk
    {5, 100},      // partial last chunk
    {17, 257},     // 64 threads, partial last chunk, saturated tokens 3 and 10
    {64, 2048},    // Qwen2-MoE-A2.7B's hidden size, 16-byte path
    {33, 4099},    // 4096 + 3: several chunks per thread, scalar path
    {1000, 3584},  // Qwen2-57B-A14B's hidden size
    {8192, 2048},  // 4 x 2048 tokens
};

// Each shape's case, made once (8192 x 2048 takes a moment on the host).
const MoeSharedGateCase& case_for(const MoeSharedGateShape& s) {
  static std::map<std::pair<int64_t, int64_t>, MoeSharedGateCase> cases;
  auto it = cases.find({s.T, s.H});
  if (it == cases.end()) it = cases.emplace(std::pair{s.T, s.H}, make_moe_shared_gate_case(s)).first;
  return it->second;
}

// The case on the device, every [T, H] and [H] bf16 buffer `offset` elements into its allocation.
class DeviceGate {
 public:
  DeviceGate(const MoeSharedGateCase& c, int64_t offset)
      : c_(c),
        o_(offset),
        n_(static_cast<size_t>(c.s.T * c.s.H)),
        shared_(n_ + o_),
        input_(n_ + o_),
        dy_(n_ + o_),
        out_(n_ + o_),
        d_shared_(n_ + o_),
        d_input_(n_ + o_),
        weight_(c.s.H + o_),
        gate_(c.s.T),
        gate_ref_(c.s.T),
        d_logit_(c.s.T),
        d_weight_(c.s.H),
        scratch_bytes_(kernels::column_sums_scratch_bytes(c.s.T, c.s.H)),
        scratch_(scratch_bytes_ / sizeof(float)) {
    shared_.upload(with_offset(c.shared, o_));
    input_.upload(with_offset(c.input, o_));
    dy_.upload(with_offset(c.dy, o_));
    weight_.upload(with_offset(c.weight, o_));
    if (c.s.T > 0) gate_ref_.upload(c.gate_ref);
  }

  // The accumulated outputs' starts; the overwritten outputs and the scratch poisoned.
  void prepare() {
    out_.upload(with_offset(c_.out0, o_));
    d_input_.upload(with_offset(c_.d_input0, o_));
    d_weight_.upload(c_.d_weight0);
    gate_.poison();
    d_shared_.poison();
    d_logit_.poison();
    scratch_.poison();
  }

  // Forward, backward (on the twin's gate, or the forward's own), input grad, weight gradient.
  void enqueue(cudaStream_t stream, bool twin_gate) const {
    const int64_t T = c_.s.T, H = c_.s.H;
    kernels::moe_shared_gate_forward(stream, {.out = out_.get() + o_,
                                              .gate = gate_.get(),
                                              .shared = shared_.get() + o_,
                                              .input = input_.get() + o_,
                                              .weight = weight_.get() + o_,
                                              .T = T,
                                              .H = H});
    kernels::moe_shared_gate_backward(stream, {.d_shared = d_shared_.get() + o_,
                                               .d_logit = d_logit_.get(),
                                               .dy = dy_.get() + o_,
                                               .shared = shared_.get() + o_,
                                               .gate = twin_gate ? gate_ref_.get() : gate_.get(),
                                               .T = T,
                                               .H = H});
    kernels::moe_shared_gate_input_grad(
        stream,
        {.d_input = d_input_.get() + o_, .d_logit = d_logit_.get(), .weight = weight_.get() + o_, .T = T, .H = H});
    kernels::column_sums(stream, {.dst = d_weight_.get(),
                                  .scratch = scratch_.get(),
                                  .scratch_bytes = scratch_bytes_,
                                  .in = input_.get() + o_,
                                  .rows = T,
                                  .cols = H,
                                  .row_scale = d_logit_.get()});
  }

  MoeSharedGateOutputs download() const {
    return {.out = without_offset(out_.download(), o_),
            .d_shared = without_offset(d_shared_.download(), o_),
            .d_input = without_offset(d_input_.download(), o_),
            .gate = gate_.download(),
            .d_logit = d_logit_.download(),
            .d_weight = d_weight_.download()};
  }

 private:
  const MoeSharedGateCase& c_;
  int64_t o_;
  size_t n_;
  DeviceBuffer<bf16> shared_, input_, dy_, out_, d_shared_, d_input_, weight_;
  DeviceBuffer<float> gate_, gate_ref_, d_logit_, d_weight_;
  size_t scratch_bytes_;
  DeviceBuffer<float> scratch_;
};

MoeSharedGateOutputs run_once(DeviceGate& dev, bool twin_gate) {
  cuda::Stream stream;
  dev.prepare();
  dev.enqueue(stream, twin_gate);
  sync_device();
  return dev.download();
}

class MoeSharedGateGpu : public ::testing::TestWithParam<MoeSharedGateShape> {};

TEST_P(MoeSharedGateGpu, MatchesTwin) {
  const MoeSharedGateCase& c = case_for(GetParam());
  DeviceGate dev(c, 0);
  expect_moe_shared_gate_matches_twin(c, run_once(dev, /*twin_gate=*/true));
}

// The whole sequence with the backward on the forward's gate (as in training): an eager rerun and a CUDA-graph
// replay give the first run's bits.
TEST_P(MoeSharedGateGpu, RerunAndGraphReplayAreBitwiseIdentical) {
  const MoeSharedGateCase& c = case_for(GetParam());
  DeviceGate dev(c, 0);
  cuda::Stream stream;
  const auto prepare = [&] { dev.prepare(); };
  const auto enqueue = [&](cudaStream_t st) { dev.enqueue(st, /*twin_gate=*/false); };
  const auto snapshot = [&] {
    const MoeSharedGateOutputs o = dev.download();
    return Snapshot{named_bytes("out", o.out),           named_bytes("gate", o.gate),
                    named_bytes("d_shared", o.d_shared), named_bytes("d_logit", o.d_logit),
                    named_bytes("d_input", o.d_input),   named_bytes("d_weight", o.d_weight)};
  };
  prepare();
  enqueue(stream);
  sync_device();
  const Snapshot first = snapshot();
  expect_bitwise_repeatable(stream, prepare, enqueue, snapshot, first);
}

// One element past alignment every bf16 pointer takes the scalar path: the same chunks in the same order.
TEST_P(MoeSharedGateGpu, BitsDoNotDependOnTheAlignment) {
  const MoeSharedGateCase& c = case_for(GetParam());
  DeviceGate aligned(c, 0), shifted(c, 1);
  EXPECT_TRUE(bitwise_equal_outputs(run_once(shifted, true), run_once(aligned, true)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeSharedGateGpu, ::testing::ValuesIn(kShapes), [](const auto& info) {
  return strprintf("T%lld_H%lld", static_cast<long long>(info.param.T), static_cast<long long>(info.param.H));
});

TEST(MoeSharedGateGpuMisc, RejectsBadParamsNamingTheField) {
  const int64_t T = 4, H = 8;
  DeviceBuffer<bf16> a(T * H), b(T * H), s(T * H), w(H);
  DeviceBuffer<float> gate(T), d_logit(T);
  a.upload(std::vector<bf16>(T * H));
  b.upload(std::vector<bf16>(T * H));
  s.upload(std::vector<bf16>(T * H));
  w.upload(std::vector<bf16>(H));
  gate.upload(std::vector<float>(T, 0.5f));
  cuda::Stream stream;
  expect_bad_moe_shared_gate_params_named(
      {.out = a.get(), .gate = gate.get(), .shared = s.get(), .input = b.get(), .weight = w.get(), .T = T, .H = H},
      {.d_shared = a.get(),
       .d_logit = d_logit.get(),
       .dy = b.get(),
       .shared = s.get(),
       .gate = gate.get(),
       .T = T,
       .H = H},
      {.d_input = a.get(), .d_logit = d_logit.get(), .weight = w.get(), .T = T, .H = H}, [&](const auto& p) {
        return thrown_message([&] {
          using P = std::decay_t<decltype(p)>;
          if constexpr (std::is_same_v<P, kernels::MoeSharedGateForwardParams>) {
            kernels::moe_shared_gate_forward(stream, p);
          } else if constexpr (std::is_same_v<P, kernels::MoeSharedGateBackwardParams>) {
            kernels::moe_shared_gate_backward(stream, p);
          } else {
            kernels::moe_shared_gate_input_grad(stream, p);
          }
        });
      });
  sync_device();
}

}  // namespace

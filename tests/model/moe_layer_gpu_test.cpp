// The GPU MoE layer (model/layers/moe_layer.h) against its CPU fp32 twin, one layer alone: the same
// bf16-representable input, weights and output gradient, the modules run in order (moe_router,
// moe_preprocess, moe; backward reversed) exactly as the step runs them, at small odd shapes: 13 or 15
// tokens, 5 experts, top-3, a shared expert, token drop by probs and by position (padded and packed),
// sigmoid and sqrtsoftplus routing with the expert bias and seq_aux_loss, all tokens on one expert (the
// other experts get zero tokens; with capacity, most of its tokens are dropped), and Nemotron-H's squared-ReLU experts
// (routed and shared; FC1 is [F, H] per expert, so the grouped GEMMs run at N = F), and the experts' linear biases
// (add_bias_linear).
//
// The router is fp32 on both sides from the same bf16 values, so the routing decisions must agree
// exactly (a flip would need a logit gap below ~1e-6): routing map, kept counts and the step's token
// counts are compared for equality. Tolerances, bf16 compute vs fp32 (tests/model/train_step_gpu_test.cu
// explains them): output and input gradient per-tensor relative error <= 2e-2, weight gradients <= 5e-2,
// aux and z losses (fp32 on both sides) relative 1e-4. Outputs are poisoned (NaN) first, so a row that
// is never written fails; gradients start from a non-zero value, so the accumulation is checked too.
// Two cases again with bf16 main gradients (ddp.grad_reduce_in_fp32=false): the GPU's gradients start from bf16
// values and are stored rounded, the twin's are rounded once after its backward; the same tolerances.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "cuda/arena.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "model/layer_context.h"
#include "moe_layer_case.h"

namespace sg::model {
namespace {

using test::MoeCase;

constexpr double kOutTol = 2e-2;
constexpr double kGradTol = 5e-2;

size_t sz(int64_t n) { return static_cast<size_t>(n); }

// One GPU MoE layer with the contexts the step would give it.
struct GpuHarness {
  ModelSpec spec;
  BatchSpec batch;
  MoeLayer layer;
  ModelLayout layout;
  cuda::MemoryPlan plan;
  SharedBuffers shared;
  SharedObjects objects;
  std::unique_ptr<kernels::CudnnContext> cudnn;
  std::unique_ptr<cuda::Arena> arena;
  std::unique_ptr<kernels::Blas> blas;
  cuda::MemorySlot params_s, main_s, grads_s, scalars_s, in_s, out_s, dout_s, din_s, blas_s, counts_s;
  int64_t T = 0, H = 0;
  bool grads_bf16 = false;

  // grad_dtype: the main gradients' (bf16 with ddp.grad_reduce_in_fp32=false).
  GpuHarness(const ModelSpec& s, const BatchSpec& b, kernels::FloatDtype grad_dtype = kernels::FloatDtype::fp32)
      : spec(s), batch(b), layer(stack_places(spec)[0]), layout(test::declare_moe_case(spec, layer)),
        grads_bf16(grad_dtype == kernels::FloatDtype::bf16) {
    T = batch.tokens_per_microbatch(spec);
    H = spec.hidden_size;
    using cuda::MemoryCategory;
    const size_t n = sz(layout.total());
    params_s = plan.add_array<bf16>("parameters", MemoryCategory::parameters, n);
    main_s = plan.add_array<float>("main_weights", MemoryCategory::main_weights, n);
    grads_s = grads_bf16 ? plan.add_array<bf16>("grads", MemoryCategory::gradients, n)
                         : plan.add_array<float>("grads", MemoryCategory::gradients, n);
    scalars_s = plan.add_array<float>("aux_scalars", MemoryCategory::optimizer_state, 2);
    in_s = plan.add_array<bf16>("in", MemoryCategory::activations, sz(T * H));
    out_s = plan.add_array<bf16>("out", MemoryCategory::activations, sz(T * H));
    dout_s = plan.add_array<bf16>("dout", MemoryCategory::activations, sz(T * H));
    din_s = plan.add_array<bf16>("din", MemoryCategory::activations, sz(T * H));
    blas_s = plan.add("cublas", MemoryCategory::workspaces, kernels::Blas::kWorkspaceBytes);
    LayerPlanContext pc(spec, batch, plan, shared);
    pc.set_layer(0);
    layer.plan(pc);
    // The step-wide counts the layer asked for (its tokens per expert), as TrainStep plans them.
    counts_s =
        plan.add_array<int32_t>("state.step_counts", MemoryCategory::optimizer_state, sz(pc.step_counts_total()));
    cudnn = std::make_unique<kernels::CudnnContext>();
    DevicePlanContext dc(spec, batch, shared, objects, *cudnn, grad_dtype);
    layer.plan_device(dc);
    shared.plan(plan);
    arena = std::make_unique<cuda::Arena>(plan);
    arena->zero();
    shared.bind(*arena);
    blas = std::make_unique<kernels::Blas>(arena->raw(blas_s), kernels::Blas::kWorkspaceBytes);
    StepPointers p;
    p.params = arena->get<bf16>(params_s);
    p.main_weights = arena->get<float>(main_s);
    p.grads =
        grads_bf16 ? kernels::FloatBuffer(arena->get<bf16>(grads_s)) : kernels::FloatBuffer(arena->get<float>(grads_s));
    p.aux_loss = arena->get<float>(scalars_s);
    p.z_loss = p.aux_loss + 1;
    p.step_counts = arena->get<int32_t>(counts_s);
    LayerBindContext bc(layout, *arena, shared, objects, *blas, p);
    layer.bind(bc);
    SG_CUDA_CHECK(cudaDeviceSynchronize());
  }

  template <class T_>
  void upload(cuda::MemorySlot slot, const std::vector<T_>& v) {
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    SG_CUDA_CHECK(cudaMemcpy(arena->raw(slot), v.data(), v.size() * sizeof(T_), cudaMemcpyHostToDevice));
    SG_CUDA_CHECK(cudaDeviceSynchronize());
  }
  template <class T_>
  std::vector<T_> download(const void* src, size_t n) {
    std::vector<T_> v(n);
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    SG_CUDA_CHECK(cudaMemcpy(v.data(), src, n * sizeof(T_), cudaMemcpyDeviceToHost));
    return v;
  }
  void poison(cuda::MemorySlot slot, size_t bytes) {
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    SG_CUDA_CHECK(cudaMemset(arena->raw(slot), 0xFF, bytes));
    SG_CUDA_CHECK(cudaDeviceSynchronize());
  }
};

struct Inputs {
  std::vector<float> weights, input, d_output, grads0;
};

// bf16-representable values, so both sides compute from the same numbers.
Inputs make_inputs(const ModelSpec& spec, const ModelLayout& layout, int64_t T, bool all_on_one) {
  Inputs in;
  in.weights = test::round_bf16(test::moe_case_weights(layout, 21));
  in.input = test::round_bf16(test::random_values(sz(T * spec.hidden_size), 23));
  in.d_output = test::round_bf16(test::random_values(in.input.size(), 29, 0.5f));
  in.grads0 = test::random_values(in.weights.size(), 31, 0.01f);  // the step accumulates into main_grad
  if (all_on_one) {
    // Router row 0 along +1, the others zero, and every token with a positive sum: expert 0 wins for all.
    const ParamTensor& gate = layout.find("backbone.layers.0.mixer.gate.weight");
    for (int64_t i = 0; i < gate.numel; ++i) {
      in.weights[sz(gate.offset + i)] = i < spec.hidden_size ? 0.25f : 0.0f;
    }
    for (auto& x : in.input) x = test::round_bf16({std::fabs(x) + 0.125f})[0];
  }
  return in;
}

struct CaseParam {
  MoeCase moe;
  bool all_on_one = false;
  bool bf16_grads = false;  // ddp.grad_reduce_in_fp32=false: the GPU's main gradients in bf16, the twin's rounded
};

class MoeLayerGpu : public ::testing::TestWithParam<CaseParam> {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

TEST_P(MoeLayerGpu, MatchesTheCpuTwin) {
  const CaseParam c = GetParam();
  const ModelSpec spec = test::moe_case_spec(c.moe);
  const BatchSpec batch = test::moe_case_batch(c.moe);
  GpuHarness gpu(spec, batch, c.bf16_grads ? kernels::FloatDtype::bf16 : kernels::FloatDtype::fp32);
  const int64_t T = gpu.T, H = gpu.H;
  Inputs in = make_inputs(spec, gpu.layout, T, c.all_on_one);
  if (c.bf16_grads) in.grads0 = test::round_bf16(in.grads0);
  const MoeShapes& s = gpu.layer.shapes();

  // ---- GPU: one step's worth of one microbatch ----
  gpu.upload(gpu.params_s, test::to_bf16(in.weights));
  gpu.upload(gpu.main_s, in.weights);
  if (c.bf16_grads) {
    gpu.upload(gpu.grads_s, test::to_bf16(in.grads0));
  } else {
    gpu.upload(gpu.grads_s, in.grads0);
  }
  gpu.upload(gpu.in_s, test::to_bf16(in.input));
  gpu.upload(gpu.dout_s, test::to_bf16(in.d_output));
  gpu.poison(gpu.out_s, sz(T * H) * sizeof(bf16));
  gpu.poison(gpu.din_s, sz(T * H) * sizeof(bf16));
  LayerIO io;
  io.input = gpu.arena->get<bf16>(gpu.in_s);
  io.output = gpu.arena->get<bf16>(gpu.out_s);
  io.d_output = gpu.arena->get<bf16>(gpu.dout_s);
  io.d_input = gpu.arena->get<bf16>(gpu.din_s);
  cuda::Stream stream;
  {
    cuda::StepGuard guard("MoE layer test");  // no allocation or host sync inside the step
    gpu.layer.step_begin(stream);
    for (graph::Module m : gpu.layer.modules()) gpu.layer.forward(m, stream, io);
    const auto& modules = gpu.layer.modules();
    for (size_t i = modules.size(); i-- > 0;) gpu.layer.backward(modules[i], stream, io);
    gpu.layer.step_end(stream);
  }
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<float> out = test::to_float(gpu.download<bf16>(io.output, sz(T * H)));
  const std::vector<float> d_in = test::to_float(gpu.download<bf16>(io.d_input, sz(T * H)));
  const std::vector<float> grads =
      c.bf16_grads ? test::to_float(gpu.download<bf16>(gpu.arena->raw(gpu.grads_s), in.weights.size()))
                   : gpu.download<float>(gpu.arena->raw(gpu.grads_s), in.weights.size());
  const std::vector<float> main = gpu.download<float>(gpu.arena->raw(gpu.main_s), in.weights.size());
  const std::vector<float> losses = gpu.download<float>(gpu.arena->raw(gpu.scalars_s), 2);
  const std::vector<int32_t> counts = gpu.download<int32_t>(gpu.layer.step_token_counts(), sz(s.E));

  // ---- CPU twin ----
  MoeLayerCpu cpu(stack_places(spec)[0]);
  const ModelLayout cpu_layout = test::declare_moe_case(spec, cpu);
  cpu.plan(spec, batch);
  std::vector<float> cpu_weights = in.weights, cpu_grads = in.grads0, cpu_out(sz(T * H)), cpu_din(sz(T * H));
  AuxLosses aux;
  CpuLayerIO cio{cpu_layout};
  cio.weights = cpu_weights.data();
  cio.grads = cpu_grads.data();
  cio.input = in.input.data();
  cio.output = cpu_out.data();
  cio.d_output = in.d_output.data();
  cio.d_input = cpu_din.data();
  cio.aux_losses = &aux;
  cpu.step_begin();
  cpu.forward(cio);
  const std::vector<int32_t> cpu_counts = cpu.step_token_counts();
  cpu.backward(cio);
  if (c.bf16_grads) cpu_grads = test::round_bf16(cpu_grads);  // each block has one writer: one rounding
  cpu.step_end(cpu_layout, cpu_weights.data());

  // ---- compare ----
  EXPECT_EQ(counts, cpu_counts) << "kept tokens per expert differ: the routing or the drop decisions differ";
  int64_t kept = 0;
  for (int32_t n : counts) kept += n;
  std::printf("%s: T=%lld E=%lld k=%lld rows=%lld kept %lld of %lld slots; counts", c.moe.name, (long long)T,
              (long long)s.E, (long long)s.k, (long long)s.rows, (long long)kept, (long long)(T * s.k));
  for (int32_t n : counts) std::printf(" %d", n);
  std::printf("\n");
  if (c.all_on_one) {
    EXPECT_EQ(cpu.routing_map()[0], 0);
    for (int64_t e = 1; e < s.E && s.k == 1; ++e) EXPECT_EQ(counts[sz(e)], 0) << "expert " << e << " should be empty";
  }
  const double out_err = test::relative_error(out, cpu_out);
  const double din_err = test::relative_error(d_in, cpu_din);
  std::printf("  output rel err %.3e, d input rel err %.3e\n", out_err, din_err);
  EXPECT_LE(out_err, kOutTol) << "layer output";
  EXPECT_LE(din_err, kOutTol) << "input gradient";
  for (const ParamTensor& t : gpu.layout.tensors()) {
    if (t.name.find("mixer.") == std::string::npos) continue;
    std::vector<float> g(grads.begin() + t.offset, grads.begin() + t.offset + t.numel);
    std::vector<float> r(cpu_grads.begin() + t.offset, cpu_grads.begin() + t.offset + t.numel);
    const double err = test::relative_error(g, r);
    std::printf("  %-52s grad rel err %.3e\n", t.name.c_str(), err);
    EXPECT_LE(err, kGradTol) << t.name;
    if (t.name.find("e_score_correction_bias") != std::string::npos) {
      std::vector<float> b(main.begin() + t.offset, main.begin() + t.offset + t.numel);
      std::vector<float> rb(cpu_weights.begin() + t.offset, cpu_weights.begin() + t.offset + t.numel);
      EXPECT_LE(test::relative_error(b, rb), 1e-6) << "expert bias after step_end";
    }
  }
  std::printf("  aux loss gpu %.7g cpu %.7g, z loss gpu %.7g cpu %.7g\n", losses[0], aux.load_balancing, losses[1],
              aux.z);
  EXPECT_NEAR(losses[0], aux.load_balancing, 1e-4 * std::fabs(aux.load_balancing) + 1e-7) << "aux loss";
  EXPECT_NEAR(losses[1], aux.z, 1e-4 * std::fabs(aux.z) + 1e-7) << "z loss";
  if (s.losses.aux_coeff > 0.0f) {
    EXPECT_GT(losses[0], 0.0f);
  }
}

const CaseParam kCases[] = {
    {{.name = "dropless_softmax_shared", .H = 24, .E = 5, .k = 3, .F = 16, .S = 8, .micro_batch = 1, .seq = 13}},
    {{.name = "dropless_pre_softmax", .H = 16, .E = 5, .k = 2, .F = 8, .S = 0, .micro_batch = 1, .seq = 13,
      .pre_softmax = true, .scaling = 2.0, .z = 0.0}},
    {{.name = "sigmoid_bias_seq_aux", .H = 16, .E = 5, .k = 3, .F = 24, .S = 0, .micro_batch = 3, .seq = 5,
      .score = ref::MoeScoreFunction::sigmoid, .scaling = 2.5, .balancing = MoeLoadBalancing::seq_aux_loss,
      .expert_bias = true}},
    {{.name = "sqrtsoftplus_bias_seq_aux", .H = 16, .E = 5, .k = 3, .F = 24, .S = 0, .micro_batch = 3, .seq = 5,
      .score = ref::MoeScoreFunction::sqrtsoftplus, .scaling = 2.5, .balancing = MoeLoadBalancing::seq_aux_loss,
      .expert_bias = true}},
    {{.name = "drop_probs_padded", .H = 16, .E = 5, .k = 3, .F = 8, .S = 8, .micro_batch = 1, .seq = 13,
      .capacity_factor = 0.5, .pad = true}},
    {{.name = "drop_position_packed", .H = 24, .E = 5, .k = 2, .F = 16, .S = 0, .micro_batch = 1, .seq = 15,
      .capacity_factor = 0.8, .drop = ref::MoeDropPolicy::position}},
    {{.name = "all_on_one_dropless", .H = 16, .E = 4, .k = 1, .F = 8, .S = 0, .micro_batch = 1, .seq = 13}, true},
    {{.name = "all_on_one_capacity", .H = 16, .E = 4, .k = 1, .F = 8, .S = 0, .micro_batch = 1, .seq = 13,
      .capacity_factor = 1.0, .pad = true},
     true},
    {{.name = "squared_relu_shared", .H = 24, .E = 5, .k = 3, .F = 16, .S = 8, .micro_batch = 1, .seq = 13,
      .activation = MlpActivation::squared_relu}},
    {{.name = "squared_relu_sigmoid_bias_dropped", .H = 16, .E = 6, .k = 2, .F = 8, .S = 16, .micro_batch = 2,
      .seq = 7, .score = ref::MoeScoreFunction::sigmoid, .scaling = 2.5, .expert_bias = true, .capacity_factor = 0.75,
      .activation = MlpActivation::squared_relu}},
    {{.name = "bf16_grads_dropless_softmax_shared", .H = 24, .E = 5, .k = 3, .F = 16, .S = 8, .micro_batch = 1,
      .seq = 13},
     false,
     true},
    {{.name = "bf16_grads_all_on_one_capacity", .H = 16, .E = 4, .k = 1, .F = 8, .S = 0, .micro_batch = 1,
      .seq = 13, .capacity_factor = 1.0, .pad = true},
     true,
     true},
    // Qwen2-MoE's gated shared expert (moe_shared_expert_gate), with fp32 and bf16 main gradients.
    {{.name = "shared_gate", .H = 24, .E = 5, .k = 3, .F = 16, .S = 8, .micro_batch = 1, .seq = 13,
      .shared_gate = true}},
    {{.name = "bf16_grads_squared_relu_shared_gate", .H = 16, .E = 6, .k = 2, .F = 8, .S = 16, .micro_batch = 2,
      .seq = 7, .activation = MlpActivation::squared_relu, .shared_gate = true},
     false,
     true},
    // add_bias_linear: the experts' biases, dropless with odd widths, padded to capacity with all tokens on one expert
    // (the others' bias gradients stay their start), and into bf16 main gradients.
    {{.name = "linear_biases_dropless", .H = 24, .E = 5, .k = 3, .F = 16, .S = 0, .micro_batch = 1, .seq = 13,
      .linear_biases = true}},
    {{.name = "linear_biases_all_on_one_capacity", .H = 16, .E = 4, .k = 1, .F = 8, .S = 0, .micro_batch = 1,
      .seq = 13, .capacity_factor = 1.0, .pad = true, .linear_biases = true},
     true},
    {{.name = "bf16_grads_linear_biases_squared_relu_dropped", .H = 16, .E = 6, .k = 2, .F = 8, .S = 0,
      .micro_batch = 2, .seq = 7, .score = ref::MoeScoreFunction::sigmoid, .scaling = 2.5, .expert_bias = true,
      .capacity_factor = 0.75, .activation = MlpActivation::squared_relu, .linear_biases = true},
     false,
     true},
};

INSTANTIATE_TEST_SUITE_P(Cases, MoeLayerGpu, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.moe.name); });

}  // namespace
}  // namespace sg::model

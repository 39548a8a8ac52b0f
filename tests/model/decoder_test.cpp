// The GPU decoding twins (model/gpu_decode_layer.h), without a GPU: they declare the same parameter layout as
// the training layers (the decoder reads the training step's checkpoints by the same references) and ask for the
// blocks those declared to be read in fp32, and their scratch, taken twice from a DecodeScratch (sizing, then
// binding), lands at the same aligned places inside the region sized for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/decode_linear.h"
#include "model/gpu_decode_layer.h"
#include "model/layer_registry.h"
#include "tiny_model.h"

namespace sg::model {
namespace {

// The flat offsets of the blocks the decoding twins ask for in fp32, and of those the training layers declared with
// ParamBuilder::fp32_vector (what the training step reads in fp32): one set, whichever side says it.
void expect_the_same_fp32_blocks(const std::vector<std::unique_ptr<GpuDecodeLayer>>& layers, const ModelLayout& decoded,
                                 const ModelLayout& trained) {
  std::vector<int64_t> asked, declared;
  for (const auto& layer : layers) {
    for (const ParamRef ref : layer->fp32_params()) asked.push_back(decoded.offset(ref));
  }
  for (const ParamLayout::Fp32Block& block : trained.params.fp32_blocks()) declared.push_back(block.flat_offset);
  std::sort(asked.begin(), asked.end());
  EXPECT_EQ(asked, declared);
}

TEST(DecodeScratch, SizesAndBindsTheSamePiecesAligned) {
  DecodeScratch sizing;
  EXPECT_EQ(sizing.take<float>(3), nullptr);
  EXPECT_EQ(sizing.take<int32_t>(0), nullptr);
  EXPECT_EQ(sizing.take<char>(257), nullptr);
  EXPECT_EQ(sizing.bytes(), 256u + 0u + 512u);
  std::vector<char> region(sizing.bytes());
  DecodeScratch bound(region.data());
  EXPECT_EQ(reinterpret_cast<char*>(bound.take<float>(3)), region.data());
  EXPECT_EQ(reinterpret_cast<char*>(bound.take<int32_t>(0)), region.data() + 256);
  EXPECT_EQ(bound.take<char>(257), region.data() + 256);
  EXPECT_EQ(bound.bytes(), sizing.bytes());
}

TEST(GpuDecodeLayers, DeclareTheTrainingLayout) {
  ModelSpec hybrid_moe = test::tiny_hybrid_spec("M*-ME");  // Nemotron-H's squared-ReLU experts with their bias
  hybrid_moe.num_moe_experts = 4;
  hybrid_moe.moe_router_topk = 2;
  hybrid_moe.moe_ffn_hidden_size = 8;
  hybrid_moe.moe.score_function = ref::MoeScoreFunction::sigmoid;
  hybrid_moe.moe.shared_expert_intermediate_size = 16;
  for (const ModelSpec& m :
       {test::tiny_model_spec(), test::with_mixtral_experts(test::tiny_model_spec()), hybrid_moe}) {
    SCOPED_TRACE(describe_stack(m));
    std::vector<std::unique_ptr<GpuDecodeLayer>> layers = make_gpu_decode_layers(m);
    ASSERT_EQ(layers.size(), stack_places(m).size());
    const ModelLayout decoded = declare_model(m, [&](size_t i, LayerDeclarations& d) { layers[i]->declare(d); });
    const ModelLayout trained = model_layout(m);
    ASSERT_EQ(decoded.total(), trained.total());
    ASSERT_EQ(decoded.tensors().size(), trained.tensors().size());
    for (size_t i = 0; i < trained.tensors().size(); ++i) {
      EXPECT_EQ(decoded.tensors()[i].name, trained.tensors()[i].name);
      EXPECT_EQ(decoded.tensors()[i].offset, trained.tensors()[i].offset);
    }
    expect_the_same_fp32_blocks(layers, decoded, trained);
  }
  // The expert bias is read in fp32 (as the training step keeps it) only where it routes; asked before plan().
  for (const bool routes : {false, true}) {
    hybrid_moe.moe.enable_expert_bias = routes;
    std::vector<std::unique_ptr<GpuDecodeLayer>> layers = make_gpu_decode_layers(hybrid_moe);
    const ModelLayout decoded =
        declare_model(hybrid_moe, [&](size_t i, LayerDeclarations& d) { layers[i]->declare(d); });
    EXPECT_EQ(layers[4]->fp32_params().size(), routes ? 1u : 0u);  // "M*-ME": the E
    expect_the_same_fp32_blocks(layers, decoded, model_layout(hybrid_moe));
  }
}

// Attention, MLP and Mamba plan without a device (the MoE twin's grouped GEMMs need one: the GPU tests).
TEST(GpuDecodeLayers, PlanTheirStateAndScratchForTheLongestCall) {
  ModelSpec m = test::tiny_hybrid_spec("M*-");
  DecodeSpec decode;
  decode.batch = 3;
  // A prompt of more rows than the decoder gives the matrix-vector kernel under any mode (model/decode_gemv.h).
  const int64_t prompt = kernels::kDecodeLinearMaxRows + 1;
  decode.max_prompt_tokens = prompt;
  decode.max_new_tokens = 4;
  std::vector<std::unique_ptr<GpuDecodeLayer>> layers = make_gpu_decode_layers(m);
  declare_model(m, [&](size_t i, LayerDeclarations& d) { layers[i]->declare(d); });
  cuda::MemoryPlan plan;
  for (auto& layer : layers) layer->plan(m, decode, plan);
  // The attention layer's KV cache and the Mamba layer's two states; the MLP keeps nothing.
  const cuda::MemorySlot k = plan.find("decode.layer1.k_cache");
  ASSERT_TRUE(k.valid());
  EXPECT_EQ(plan.at(k).bytes, static_cast<size_t>(3 * m.num_query_groups * (prompt + 4) * m.head_dim()) * 2);
  EXPECT_TRUE(plan.find("decode.layer0.conv_state").valid());
  EXPECT_TRUE(plan.find("decode.layer0.ssm_state").valid());
  EXPECT_EQ(plan.size(), 4u);
  // The squared-ReLU MLP's scratch for the prompt's rows (the longest call): cuBLASLt's up projection and then the
  // activation kernel (model/decode_linear.h).
  DecodeScratch mlp;
  layers[2]->take_scratch(mlp);
  const size_t up = static_cast<size_t>(prompt * m.ffn_hidden_size * 2), act = up;
  EXPECT_EQ(mlp.bytes(), (up + 255) / 256 * 256 + (act + 255) / 256 * 256);
  // With prompts of 2 tokens the longest call is the step's 3 rows: the kernel, its activation fused, needs only the
  // activation's output.
  decode.max_prompt_tokens = 2;
  ASSERT_LE(decode.max_rows(), kDecodeGemvMaxRows);
  cuda::MemoryPlan short_plan;
  for (auto& layer : layers) layer->plan(m, decode, short_plan);
  DecodeScratch short_mlp;
  layers[2]->take_scratch(short_mlp);
  const size_t short_act = static_cast<size_t>(3 * m.ffn_hidden_size * 2);
  EXPECT_EQ(short_mlp.bytes(), (short_act + 255) / 256 * 256);
  // The Mamba layer's parameters read in fp32, as the training step reads its main weights.
  EXPECT_EQ(layers[0]->fp32_params().size(), 3u);
  EXPECT_TRUE(layers[1]->fp32_params().empty());
}

}  // namespace
}  // namespace sg::model

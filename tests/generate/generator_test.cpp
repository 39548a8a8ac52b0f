// Which decoder generate runs: the GPU one when a GPU is there and --cpu is not given (every layer kind: Llama,
// Mixtral-style MoE, Mamba hybrids, a query width other than hidden_size), the CPU decoder without a GPU or with
// --cpu; a shape the GPU decoder's kernels do not take, on a GPU machine without --cpu, is refused naming the
// model, the reason and the fix, never switched to the CPU in silence. And how many decoding steps a chunk holds.
#include "generate/generator.h"

#include <gtest/gtest.h>

#include <string>

#include "test_util.h"
#include "model/tiny_model.h"

namespace sg::generate {
namespace {

model::ModelSpec mixtral_spec() { return test::with_mixtral_experts(test::tiny_model_spec()); }

// The tiny hybrid at a Mamba shape the GPU kernels take: 8 heads of 64, 2 groups of state 16 (in_proj 1096).
model::ModelSpec gpu_hybrid_spec(const char* pattern) {
  model::ModelSpec m = test::tiny_hybrid_spec(pattern);
  m.mamba.head_dim = 64;
  m.mamba.num_heads = 8;
  m.mamba.state_dim = 16;
  return m;
}

model::ModelSpec wide_query_spec() {  // model.kv_channels: 4 heads of 8 for hidden_size 16
  model::ModelSpec m = test::tiny_model_spec();
  m.kv_channels = 8;
  return m;
}

TEST(ChooseDecoderBackend, GpuForEveryLayerKindCpuWithoutAGpuOrWithCpu) {
  for (const model::ModelSpec& m :
       {test::tiny_model_spec(), mixtral_spec(), gpu_hybrid_spec("M*-M"), wide_query_spec()}) {
    EXPECT_EQ(choose_decoder_backend(m, "m", 1, false), DecoderBackend::gpu);
    EXPECT_EQ(choose_decoder_backend(m, "m", 1, true), DecoderBackend::cpu);
    EXPECT_EQ(choose_decoder_backend(m, "m", 0, false), DecoderBackend::cpu);
  }
}

TEST(ChooseDecoderBackend, AShapeTheGpuDecoderDoesNotTakeNamesTheReasonAndTheFix) {
  model::ModelSpec wide_heads = test::tiny_model_spec();
  wide_heads.kv_channels = 288;  // beyond the decoding attention's 256
  std::string error =
      test::thrown_message([&] { choose_decoder_backend(wide_heads, "generate CHECKPOINT /m", 1, false); });
  EXPECT_NE(
      error.find("generate CHECKPOINT /m: the GPU decoder's attention takes head_dim up to 256; this model's is 288"),
      std::string::npos)
      << error;
  EXPECT_NE(error.find("add --cpu"), std::string::npos) << error;
  EXPECT_EQ(choose_decoder_backend(wide_heads, "m", 0, false), DecoderBackend::cpu);
  // A Mamba stack has no attention: its head_dim is not the decoding attention's.
  model::ModelSpec mamba_only = gpu_hybrid_spec("MM");
  mamba_only.kv_channels = 288;
  EXPECT_EQ(choose_decoder_backend(mamba_only, "m", 1, false), DecoderBackend::gpu);
  model::ModelSpec odd = test::tiny_model_spec();
  odd.hidden_size = 20;
  odd.num_attention_heads = 5;
  odd.num_query_groups = 5;
  error = test::thrown_message([&] { choose_decoder_backend(odd, "m", 1, false); });
  EXPECT_NE(error.find("hidden_size to be a multiple of 8"), std::string::npos) << error;
  EXPECT_NE(error.find("this model's is 20"), std::string::npos) << error;
  EXPECT_NE(error.find("add --cpu"), std::string::npos) << error;
  // Mamba: the scan's head and state sizes, and the in_proj GEMM's 16-byte rows.
  error = test::thrown_message([] { choose_decoder_backend(test::tiny_hybrid_spec("M*"), "m", 1, false); });
  EXPECT_NE(error.find("mamba_state_dim 16, 32, 64 or 128; this model's are 4 and 4"), std::string::npos) << error;
  model::ModelSpec two_heads = gpu_hybrid_spec("M*");
  two_heads.mamba.num_heads = 2;
  error = test::thrown_message([&] { choose_decoder_backend(two_heads, "m", 1, false); });
  EXPECT_NE(error.find("(2 x 128 + 2 x 2 groups x 16 + 2 heads = 322) that is a multiple of 8"), std::string::npos)
      << error;
  // MoE: the experts' width.
  model::ModelSpec narrow = mixtral_spec();
  narrow.moe_ffn_hidden_size = 20;
  error = test::thrown_message([&] { choose_decoder_backend(narrow, "m", 1, false); });
  EXPECT_NE(error.find("MoE layers refuse the moe_ffn_hidden_size"), std::string::npos) << error;
  EXPECT_EQ(choose_decoder_backend(narrow, "m", 1, true), DecoderBackend::cpu);
}

// Decoding chunks sized by the measured step time, so that a stop signal is answered within about a second on the
// CPU decoder too (a 16-step chunk of a real model on the CPU outlasted the stop's grace period, and nothing was
// printed).
TEST(NextChunkSteps, AsManyStepsAsFitTheChunksSecondsWithinOneAndTheMost) {
  EXPECT_EQ(next_chunk_steps(0.001, 1.0, 16), 16);  // a GPU step: the most
  EXPECT_EQ(next_chunk_steps(0.1, 1.0, 16), 10);
  EXPECT_EQ(next_chunk_steps(0.3, 1.0, 16), 3);
  EXPECT_EQ(next_chunk_steps(2.5, 1.0, 16), 1);   // a step slower than a chunk: one at a time
  EXPECT_EQ(next_chunk_steps(0.0, 1.0, 16), 16);  // not measured (a clock too coarse)
}

}  // namespace
}  // namespace sg::generate

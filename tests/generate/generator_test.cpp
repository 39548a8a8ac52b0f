// Which decoder generate runs: the GPU one for a Llama model when a GPU is there and --cpu is not given, the
// CPU decoder without a GPU or with --cpu; a model with MoE or Mamba layers on a GPU machine without --cpu is
// refused naming the model and the fix, never switched to the CPU in silence.
#include "generate/generator.h"

#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace sg::generate {
namespace {

TEST(ChooseDecoderBackend, GpuForLlamaCpuWithoutAGpuOrWithCpu) {
  EXPECT_EQ(choose_decoder_backend("LlamaForCausalLM", "m", 1, false), DecoderBackend::gpu);
  EXPECT_EQ(choose_decoder_backend("LlamaForCausalLM", "m", 1, true), DecoderBackend::cpu);
  EXPECT_EQ(choose_decoder_backend("LlamaForCausalLM", "m", 0, false), DecoderBackend::cpu);
  for (const char* other : {"NemotronHForCausalLM", "MixtralForCausalLM"}) {
    EXPECT_EQ(choose_decoder_backend(other, "m", 0, false), DecoderBackend::cpu) << other;
    EXPECT_EQ(choose_decoder_backend(other, "m", 2, true), DecoderBackend::cpu) << other;
  }
}

TEST(ChooseDecoderBackend, AnotherArchitectureOnAGpuNamesTheFix) {
  const std::string error = test::thrown_message([] {
    choose_decoder_backend("MixtralForCausalLM", "generate CHECKPOINT /m (MixtralForCausalLM, 4 layers)", 1, false);
  });
  EXPECT_NE(error.find("generate CHECKPOINT /m (MixtralForCausalLM, 4 layers)"), std::string::npos) << error;
  EXPECT_NE(error.find("the GPU decoder runs Llama models"), std::string::npos) << error;
  EXPECT_NE(error.find("add --cpu"), std::string::npos) << error;
}

}  // namespace
}  // namespace sg::generate

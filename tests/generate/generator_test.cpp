// Which decoder generate runs: the GPU one for a model it runs (a Llama model whose query width is hidden_size)
// when a GPU is there and --cpu is not given, the CPU decoder without a GPU or with --cpu; a model the GPU decoder
// does not run (MoE or Mamba layers, another query width) on a GPU machine without --cpu is refused naming the
// model, the reason and the fix, never switched to the CPU in silence.
#include "generate/generator.h"

#include <gtest/gtest.h>

#include <string>

#include "test_util.h"
#include "model/tiny_model.h"

namespace sg::generate {
namespace {

model::ModelSpec mixtral_spec() { return test::with_mixtral_experts(test::tiny_model_spec()); }

model::ModelSpec wide_query_spec() {  // model.kv_channels: 4 heads of 8 for hidden_size 16
  model::ModelSpec m = test::tiny_model_spec();
  m.kv_channels = 8;
  return m;
}

TEST(ChooseDecoderBackend, GpuForWhatItRunsCpuWithoutAGpuOrWithCpu) {
  const model::ModelSpec llama = test::tiny_model_spec();
  EXPECT_EQ(choose_decoder_backend(llama, "m", 1, false), DecoderBackend::gpu);
  EXPECT_EQ(choose_decoder_backend(llama, "m", 1, true), DecoderBackend::cpu);
  EXPECT_EQ(choose_decoder_backend(llama, "m", 0, false), DecoderBackend::cpu);
  for (const model::ModelSpec& other : {mixtral_spec(), test::tiny_hybrid_spec("M*-M"), wide_query_spec()}) {
    EXPECT_EQ(choose_decoder_backend(other, "m", 0, false), DecoderBackend::cpu);
    EXPECT_EQ(choose_decoder_backend(other, "m", 2, true), DecoderBackend::cpu);
  }
}

TEST(ChooseDecoderBackend, AModelTheGpuDecoderDoesNotRunNamesTheReasonAndTheFix) {
  std::string error =
      test::thrown_message([] { choose_decoder_backend(mixtral_spec(), "generate CHECKPOINT /m", 1, false); });
  EXPECT_NE(error.find("generate CHECKPOINT /m: the GPU decoder runs Llama models"), std::string::npos) << error;
  EXPECT_NE(error.find("MixtralForCausalLM"), std::string::npos) << error;
  EXPECT_NE(error.find("add --cpu"), std::string::npos) << error;
  error = test::thrown_message([] { choose_decoder_backend(test::tiny_hybrid_spec("M*-M"), "m", 1, false); });
  EXPECT_NE(error.find("NemotronHForCausalLM"), std::string::npos) << error;
  EXPECT_NE(error.find("add --cpu"), std::string::npos) << error;
  error = test::thrown_message([] { choose_decoder_backend(wide_query_spec(), "m", 1, false); });
  EXPECT_NE(error.find("4 x 8 for hidden_size 16"), std::string::npos) << error;
  EXPECT_NE(error.find("add --cpu"), std::string::npos) << error;
}

}  // namespace
}  // namespace sg::generate

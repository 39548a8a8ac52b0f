// model/weight_fingerprints.h: which weights each fingerprint the data-parallel ranks compare covers (validation.
// test_mode): the padded bf16 buffer's chunks, then the fp32 main weights' when every rank holds them all, or with the
// distributed optimizer the replica of the weights the forward reads in fp32, each named by the tensors it overlaps.
#include "model/weight_fingerprints.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/strings.h"
#include "model/layer_registry.h"
#include "reference/weight_fingerprint.h"
#include "tiny_model.h"

namespace sg::model {
namespace {

ModelLayout tiny_layout() {
  return model_layout(test::tiny_model_spec());
}

TEST(WeightFingerprints, TheBf16BufferWithItsPaddingThenTheFp32WeightsUnlessSharded) {
  const ModelLayout layout = tiny_layout();
  const int64_t padded = layout.total() + 1000;
  const WeightFingerprintLayout all = weight_fingerprint_layout(layout, padded, /*sharded=*/false);
  EXPECT_EQ(all.chunk_elements, ref::kFingerprintChunkElements);
  EXPECT_EQ(all.bf16_chunks(), ref::fingerprint_chunks(padded, all.chunk_elements));
  EXPECT_EQ(all.count(), all.bf16_chunks() + ref::fingerprint_chunks(layout.total(), all.chunk_elements));
  const WeightFingerprintLayout sharded = weight_fingerprint_layout(layout, padded, /*sharded=*/true);
  EXPECT_EQ(sharded.count(), sharded.bf16_chunks()) << "a shard of the fp32 weights differs between ranks by design, "
                                                       "and the dense model reads none in fp32";
}

// With the distributed optimizer a hybrid model's replica of Mamba's dt_bias, A_log and D is fingerprinted after the
// bf16 buffer, in the packing's order, each chunk named by the tensors its packed elements are; a chunk of the gaps
// between the packed blocks says so.
TEST(WeightFingerprints, ShardedTheReplicaOfTheFp32WeightsTheForwardReadsIsCompared) {
  const ModelLayout layout = model_layout(test::tiny_hybrid_spec("M*"));
  const int64_t packed = layout.params.fp32_packed_total();
  ASSERT_EQ(packed, 3 * kParamAlignment);
  WeightFingerprintLayout fp = weight_fingerprint_layout(layout, layout.total(), /*sharded=*/true);
  EXPECT_TRUE(fp.fp32_replica);
  EXPECT_EQ(fp.fp32_elements, packed);
  EXPECT_EQ(fp.count(), fp.bf16_chunks() + ref::fingerprint_chunks(packed, fp.chunk_elements));
  fp.chunk_elements = kParamAlignment / 2;  // a block's 4 heads, then the gap after it
  fp.bf16_elements = 0;
  const std::vector<ParamLayout::Fp32Block> blocks = layout.params.fp32_blocks();
  ASSERT_EQ(blocks.size(), 3u);
  for (size_t b = 0; b < blocks.size(); ++b) {
    const int64_t chunk = blocks[b].packed_offset / fp.chunk_elements;
    const std::string text = describe_weight_fingerprint(layout, fp, chunk);
    const auto named = std::find_if(layout.tensors().begin(), layout.tensors().end(),
                                    [&](const ParamTensor& t) { return t.offset == blocks[b].flat_offset; });
    ASSERT_NE(named, layout.tensors().end());
    const std::string suffix = std::vector<std::string>{"dt_bias", "A_log", ".D"}[b];
    EXPECT_TRUE(named->name.ends_with(suffix)) << named->name;
    EXPECT_EQ(text, "fp32 replica of " + named->name);
    EXPECT_EQ(describe_weight_fingerprint(layout, fp, chunk + 1), "fp32 replica of alignment gaps between tensors");
  }
}

TEST(WeightFingerprints, AFingerprintIsNamedByTheTensorsItsChunkOverlaps) {
  const ModelLayout layout = tiny_layout();
  const int64_t total = layout.total(), chunk = 16, padded = (total + chunk - 1) / chunk * chunk + 2 * chunk;
  const ParamTensor& first = layout.tensors().front();
  // The tensor that ends last in the flat buffer (tensors() lists them as a state dict does, not by offset).
  const ParamTensor& last = *std::max_element(
      layout.tensors().begin(), layout.tensors().end(),
      [](const ParamTensor& a, const ParamTensor& b) { return a.offset + a.numel < b.offset + b.numel; });
  const int64_t last_end = last.offset + last.numel;
  ASSERT_GE(first.numel, chunk);
  const WeightFingerprintLayout fp{.bf16_elements = padded, .fp32_elements = total, .chunk_elements = chunk};
  EXPECT_EQ(describe_weight_fingerprint(layout, fp, 0), "bf16 weights of " + first.name);
  EXPECT_EQ(describe_weight_fingerprint(layout, fp, fp.bf16_chunks()), "fp32 main weights of " + first.name);
  const int64_t last_chunk = (last_end - 1) / chunk;
  const std::string with_last = describe_weight_fingerprint(layout, fp, last_chunk);
  EXPECT_NE(with_last.find(last.name), std::string::npos) << with_last;
  EXPECT_EQ(with_last.find("padding") != std::string::npos, (last_chunk + 1) * chunk > total) << with_last;
  EXPECT_EQ(describe_weight_fingerprint(layout, fp, fp.bf16_chunks() - 1), "bf16 weights of data-parallel padding");
  const std::string fp32_last = describe_weight_fingerprint(layout, fp, fp.bf16_chunks() + last_chunk);
  EXPECT_NE(fp32_last.find(last.name), std::string::npos) << fp32_last;
  EXPECT_EQ(fp32_last.find("padding"), std::string::npos) << "the fp32 weights have none: " << fp32_last;
  // A chunk across many tensors names three and counts the others.
  const WeightFingerprintLayout one{.bf16_elements = total, .fp32_elements = 0, .chunk_elements = total};
  const std::string everything = describe_weight_fingerprint(layout, one, 0);
  EXPECT_NE(everything.find(strprintf(" and %zu more tensors", layout.tensors().size() - 3)), std::string::npos)
      << everything;
  EXPECT_THROW(describe_weight_fingerprint(layout, fp, fp.count()), Error);
}

}  // namespace
}  // namespace sg::model

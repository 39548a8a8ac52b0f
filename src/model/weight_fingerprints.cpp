#include "model/weight_fingerprints.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/strings.h"
#include "reference/weight_fingerprint.h"

namespace sg::model {

// A default layout (TrainStepOptions::weight_fingerprints off) has no chunks.
int64_t WeightFingerprintLayout::bf16_chunks() const {
  return chunk_elements > 0 ? ref::fingerprint_chunks(bf16_elements, chunk_elements) : 0;
}

int64_t WeightFingerprintLayout::count() const {
  return chunk_elements > 0 ? bf16_chunks() + ref::fingerprint_chunks(fp32_elements, chunk_elements) : 0;
}

WeightFingerprintLayout weight_fingerprint_layout(const ModelLayout& layout, int64_t padded_params, bool sharded) {
  return {.bf16_elements = padded_params,
          .fp32_elements = sharded ? 0 : layout.total(),
          .chunk_elements = ref::kFingerprintChunkElements};
}

std::string describe_weight_fingerprint(const ModelLayout& layout, const WeightFingerprintLayout& fingerprints,
                                        int64_t index) {
  SG_CHECK(index >= 0 && index < fingerprints.count(),
           strprintf("weight fingerprint %lld of %lld", static_cast<long long>(index),
                     static_cast<long long>(fingerprints.count())));
  const bool bf16 = index < fingerprints.bf16_chunks();
  const int64_t chunk = bf16 ? index : index - fingerprints.bf16_chunks();
  const int64_t begin = chunk * fingerprints.chunk_elements;
  const int64_t end =
      std::min(begin + fingerprints.chunk_elements, bf16 ? fingerprints.bf16_elements : fingerprints.fp32_elements);
  std::vector<std::string> names;
  for (const ParamTensor& t : layout.tensors()) {
    if (t.offset < end && t.offset + t.numel > begin) names.push_back(t.name);
  }
  constexpr size_t kShown = 3;
  std::string text = bf16 ? "bf16 weights of " : "fp32 main weights of ";
  if (begin >= layout.total()) return text + "data-parallel padding";
  if (names.empty()) return text + "alignment gaps between tensors";
  const std::vector<std::string> shown(names.begin(),
                                       names.begin() + static_cast<std::ptrdiff_t>(std::min(names.size(), kShown)));
  text += join(shown, ", ");
  if (names.size() > kShown) text += strprintf(" and %zu more tensors", names.size() - kShown);
  if (end > layout.total()) text += " and data-parallel padding";
  return text;
}

}  // namespace sg::model

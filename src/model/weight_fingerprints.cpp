#include "model/weight_fingerprints.h"

#include <algorithm>
#include <utility>
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
          .fp32_elements = sharded ? layout.params.fp32_packed_total() : layout.total(),
          .fp32_replica = sharded,
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
  // The flat ranges the chunk covers: itself, or those of the replica's blocks it overlaps.
  std::vector<std::pair<int64_t, int64_t>> flat;
  if (!bf16 && fingerprints.fp32_replica) {
    for (const ParamLayout::Fp32Block& b : layout.params.fp32_blocks()) {
      const int64_t from = std::max(begin, b.packed_offset), to = std::min(end, b.packed_offset + b.numel);
      if (from < to)
        flat.emplace_back(b.flat_offset + (from - b.packed_offset), b.flat_offset + (to - b.packed_offset));
    }
  } else {
    flat.emplace_back(begin, end);
  }
  std::vector<std::string> names;
  for (const ParamTensor& t : layout.tensors()) {
    for (const auto& [from, to] : flat) {
      if (t.offset < to && t.offset + t.numel > from) {
        names.push_back(t.name);
        break;
      }
    }
  }
  constexpr size_t kShown = 3;
  std::string text = bf16                        ? "bf16 weights of "
                     : fingerprints.fp32_replica ? "fp32 replica of "
                                                 : "fp32 main weights of ";
  if (names.empty() && fingerprints.fp32_replica && !bf16) return text + "alignment gaps between tensors";
  if (begin >= layout.total()) return text + "data-parallel padding";
  if (names.empty()) return text + "alignment gaps between tensors";
  const std::vector<std::string> shown(names.begin(),
                                       names.begin() + static_cast<std::ptrdiff_t>(std::min(names.size(), kShown)));
  text += join(shown, ", ");
  if (names.size() > kShown) text += strprintf(" and %zu more tensors", names.size() - kShown);
  if (end > layout.total() && (bf16 || !fingerprints.fp32_replica)) text += " and data-parallel padding";
  return text;
}

}  // namespace sg::model

#pragma once
// Hugging Face families that store consecutive tensors of the model as one (checkpoint/hf_import.cpp): Phi3's
// self_attn.qkv_proj.weight is q_proj, k_proj and v_proj stacked by rows, its mlp.gate_up_proj.weight gate_proj and
// up_proj, the same blocks stepgraph's parameters hold in that order (model/layers: one fused block each). A fused
// tensor's parts are then its row ranges: read in place, as the unfused names' tensors are, and written from the
// parameters in place (they are adjacent in the flat buffer).
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/strings.h"
#include "model/stack.h"

namespace sg::checkpoint {

// A tensor a family's files fuse: the suffix of its name and its parts' suffixes, stacked by rows in this order.
struct HfFusedTensor {
  const char* suffix;
  std::vector<const char*> parts;
};
// The tensors config.json's `model_type` fuses (Phi3's qkv_proj and gate_up_proj); none for the other families.
const std::vector<HfFusedTensor>& hf_fused_tensors(const std::string& model_type);

// The tensors a Hugging Face file of `model_type` holds, from the model's own (`tensors`: TensorRef or TensorDest in
// layout order, `element_size` bytes an element): each fused tensor's parts, consecutive there, become the fused
// tensor (rows summed; its data the first part's, the others' data following it where set). sg::Error (an internal
// check: the layers declare a fused block's parts in order) if the parts are not so.
template <class Tensor>
std::vector<Tensor> fuse_hf_tensors(const std::string& model_type, const std::vector<Tensor>& tensors,
                                    size_t element_size) {
  const std::vector<HfFusedTensor>& fusions = hf_fused_tensors(model_type);
  std::vector<Tensor> out;
  for (size_t i = 0; i < tensors.size();) {
    const HfFusedTensor* fusion = nullptr;
    for (const HfFusedTensor& f : fusions) {
      if (tensors[i].name.ends_with(f.parts[0])) fusion = &f;
    }
    if (fusion == nullptr) {
      out.push_back(tensors[i++]);
      continue;
    }
    const std::string prefix = tensors[i].name.substr(0, tensors[i].name.size() - std::string(fusion->parts[0]).size());
    Tensor fused = tensors[i];
    fused.name = prefix + fusion->suffix;
    for (size_t k = 1; k < fusion->parts.size(); ++k) {
      const Tensor* part = i + k < tensors.size() ? &tensors[i + k] : nullptr;
      const auto* expected_data = fused.data == nullptr
                                      ? nullptr
                                      : static_cast<const std::byte*>(fused.data) +
                                            static_cast<size_t>(fused.shape[0] * fused.shape[1]) * element_size;
      SG_CHECK(part != nullptr && part->name == prefix + fusion->parts[k] && part->shape.size() == 2 &&
                   fused.shape.size() == 2 && part->shape[1] == fused.shape[1] && part->dtype == fused.dtype &&
                   static_cast<const std::byte*>(part->data) == expected_data,
               strprintf("fuse_hf_tensors: %s%s does not follow %s in the model's tensors, adjacent and as wide",
                         prefix.c_str(), fusion->parts[k], tensors[i + k - 1].name.c_str()));
      fused.shape[0] += part->shape[0];
    }
    out.push_back(std::move(fused));
    i += fusion->parts.size();
  }
  return out;
}

// Replaces each tensor of `found` that config.json's `model_type` fuses (prefix + fused suffix) by its parts' entries
// (prefix + each part's suffix, rows of it in order, the layout's shapes), kept in `parts`; `file_of` follows. A fused
// tensor whose layout parts are missing, or whose shape is not theirs stacked, is left as it is and described in
// `diffs` (expected shape). Nothing for a family without fused tensors.
void split_fused_tensors(const std::string& model_type, const model::ModelLayout& layout,
                         std::map<std::string, const SafetensorsFile::Entry*>& found,
                         std::map<std::string, std::string>& file_of, std::deque<SafetensorsFile::Entry>& parts,
                         std::vector<std::string>& diffs);

}  // namespace sg::checkpoint

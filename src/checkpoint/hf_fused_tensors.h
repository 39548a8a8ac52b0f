#pragma once
// Hugging Face families that store consecutive tensors of the model as one (checkpoint/hf_import.cpp): Phi3's
// self_attn.qkv_proj.weight is q_proj, k_proj and v_proj stacked by rows, its mlp.gate_up_proj.weight gate_proj and
// up_proj, the same blocks stepgraph's parameters hold in that order (model/layers: one fused block each). A fused
// tensor's parts are then its row ranges: read in place, as the unfused names' tensors are.
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "model/stack.h"

namespace sg::checkpoint {

// Replaces each tensor of `found` that config.json's `model_type` fuses (prefix + fused suffix) by its parts' entries
// (prefix + each part's suffix, rows of it in order, the layout's shapes), kept in `parts`; `file_of` follows. A fused
// tensor whose layout parts are missing, or whose shape is not theirs stacked, is left as it is and described in
// `diffs` (expected shape). Nothing for a family without fused tensors.
void split_fused_tensors(const std::string& model_type, const model::ModelLayout& layout,
                         std::map<std::string, const SafetensorsFile::Entry*>& found,
                         std::map<std::string, std::string>& file_of, std::deque<SafetensorsFile::Entry>& parts,
                         std::vector<std::string>& diffs);

}  // namespace sg::checkpoint

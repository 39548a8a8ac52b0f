#include "checkpoint/hf_fused_tensors.h"

#include <algorithm>

#include "core/strings.h"

namespace sg::checkpoint {
namespace {

using FusedTensor = HfFusedTensor;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::vector<std::string> dims;
  for (const int64_t d : shape) dims.push_back(std::to_string(d));
  return "[" + join(dims, ", ") + "]";
}

}  // namespace

const std::vector<HfFusedTensor>& hf_fused_tensors(const std::string& model_type) {
  static const std::vector<HfFusedTensor> phi3 = {
      {"self_attn.qkv_proj.weight", {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"}},
      {"mlp.gate_up_proj.weight", {"mlp.gate_proj.weight", "mlp.up_proj.weight"}}};
  static const std::vector<HfFusedTensor> none;
  return model_type == "phi3" ? phi3 : none;
}

void split_fused_tensors(const std::string& model_type, const model::ModelLayout& layout,
                         std::map<std::string, const SafetensorsFile::Entry*>& found,
                         std::map<std::string, std::string>& file_of, std::deque<SafetensorsFile::Entry>& parts,
                         std::vector<std::string>& diffs) {
  const std::vector<FusedTensor>& fusions = hf_fused_tensors(model_type);
  if (fusions.empty()) return;
  std::map<std::string, std::vector<int64_t>> layout_shape;
  for (const auto& t : layout.tensors()) layout_shape[t.name] = t.shape;
  std::vector<std::string> fused_names;
  for (const auto& [name, entry] : found) {
    for (const FusedTensor& f : fusions) {
      if (name.ends_with(f.suffix)) fused_names.push_back(name);
    }
  }
  for (const std::string& name : fused_names) {
    const FusedTensor& f =
        *std::find_if(fusions.begin(), fusions.end(), [&](const FusedTensor& x) { return name.ends_with(x.suffix); });
    const std::string prefix = name.substr(0, name.size() - std::string(f.suffix).size());
    const SafetensorsFile::Entry& fused = *found.at(name);
    // The layout's parts stacked: rows summed, the same columns.
    std::vector<std::vector<int64_t>> shapes;
    int64_t rows = 0;
    bool known = true;
    for (const char* part : f.parts) {
      const auto it = layout_shape.find(prefix + part);
      if (it == layout_shape.end() || it->second.size() != 2) {
        known = false;
        break;
      }
      shapes.push_back(it->second);
      rows += it->second[0];
    }
    if (!known) continue;  // no such parts in the model: reported as an unexpected tensor
    const std::vector<int64_t> expected = {rows, shapes[0][1]};
    bool same_columns = true;
    for (const auto& s : shapes) same_columns = same_columns && s[1] == shapes[0][1];
    if (!same_columns || fused.shape != expected) {
      diffs.push_back(strprintf("different  %s: checkpoint %s, expected %s (its parts stacked)", name.c_str(),
                                shape_text(fused.shape).c_str(), shape_text(expected).c_str()));
      found.erase(name);
      continue;
    }
    const uint64_t row_bytes = fused.nbytes / static_cast<uint64_t>(rows);
    uint64_t offset = 0;
    for (size_t k = 0; k < f.parts.size(); ++k) {
      const std::string part_name = prefix + f.parts[k];
      const uint64_t bytes = row_bytes * static_cast<uint64_t>(shapes[k][0]);
      parts.push_back({.name = part_name, .dtype = fused.dtype, .shape = shapes[k], .data = fused.data + offset,
                       .nbytes = bytes});
      offset += bytes;
      if (found.count(part_name) != 0) {  // the folder has it both ways
        diffs.push_back(strprintf("duplicate  %s: on its own and as rows of %s", part_name.c_str(), name.c_str()));
        continue;
      }
      found[part_name] = &parts.back();
      file_of[part_name] = file_of.at(name);
    }
    found.erase(name);
    file_of.erase(name);
  }
}

}  // namespace sg::checkpoint

#include "checkpoint/hf_import.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/durable_io.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/strings.h"
#include "cuda/bf16.h"

namespace sg::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr const char* kIndexFile = "model.safetensors.index.json";

std::string fmt(double v) {
  return strprintf("%g", v);
}

// A config.json value with its key for messages.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& json, std::string path) : json_(json), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw Error(strprintf("%s: %s %s", path_.c_str(), key.c_str(), why.c_str()));
  }
  bool has(const char* key) const { return json_.contains(key) && !json_[key].is_null(); }
  int64_t integer(const char* key, std::optional<int64_t> fallback = std::nullopt) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      fail(key, "is missing (a Llama config.json needs it)");
    }
    const auto& v = json_[key];
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) fail(key, "= " + v.dump() + ": expected a positive integer");
    return v.get<int64_t>();
  }
  double number(const nlohmann::json& obj, const std::string& key, std::optional<double> fallback) const {
    if (!obj.contains(key) || obj[key].is_null()) {
      if (fallback) return *fallback;
      fail(key, "is missing");
    }
    if (!obj[key].is_number()) fail(key, "= " + obj[key].dump() + ": expected a number");
    return obj[key].get<double>();
  }
  double number(const char* key, double fallback) const { return number(json_, key, fallback); }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!json_[key].is_boolean()) fail(key, "= " + json_[key].dump() + ": expected true or false");
    return json_[key].get<bool>();
  }
  std::string string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!json_[key].is_string()) fail(key, "= " + json_[key].dump() + ": expected a string");
    return json_[key].get<std::string>();
  }
  const nlohmann::json& json() const { return json_; }

 private:
  const nlohmann::json& json_;
  std::string path_;
};

// RoPE: transformers 5 writes rope_parameters {rope_type, rope_theta, factor, ...}; transformers 4
// rope_theta and rope_scaling {rope_type (or type), factor, ...}.
void read_rope(const ConfigReader& c, model::ModelSpec& spec) {
  const nlohmann::json& j = c.json();
  const nlohmann::json* scaling = nullptr;
  std::string key = "rope_scaling";
  spec.rotary_base = c.number("rope_theta", 10000.0);
  if (c.has("rope_parameters")) {
    key = "rope_parameters";
    scaling = &j["rope_parameters"];
    if (!scaling->is_object()) c.fail(key, "= " + scaling->dump() + ": expected an object");
    spec.rotary_base = c.number(*scaling, "rope_theta", spec.rotary_base);
  } else if (c.has("rope_scaling")) {
    scaling = &j["rope_scaling"];
    if (!scaling->is_object()) c.fail(key, "= " + scaling->dump() + ": expected an object or null");
  }
  if (spec.rotary_base <= 0.0) c.fail("rope_theta", "= " + fmt(spec.rotary_base) + ": must be positive");
  if (scaling == nullptr) return;
  std::string type = "default";
  for (const char* name : {"rope_type", "type"}) {
    if (scaling->contains(name) && (*scaling)[name].is_string()) {
      type = (*scaling)[name].get<std::string>();
      key += std::string(".") + name;
      break;
    }
  }
  if (type == "default") return;
  if (type != "llama3") {
    c.fail(key, "= \"" + type +
                    "\": stepgraph implements the default and the llama3 RoPE only (no linear, dynamic, "
                    "yarn or longrope scaling)");
  }
  auto& s = spec.rope_scaling;
  s.factor = c.number(*scaling, "factor", std::nullopt);
  s.low_freq_factor = c.number(*scaling, "low_freq_factor", std::nullopt);
  s.high_freq_factor = c.number(*scaling, "high_freq_factor", std::nullopt);
  s.original_max_position_embeddings = c.number(*scaling, "original_max_position_embeddings", std::nullopt);
  if (!(s.factor > 0.0) || !s.valid()) {
    c.fail(key, strprintf("llama3 with factor %g, low_freq_factor %g, high_freq_factor %g, "
                          "original_max_position_embeddings %g: needs factor > 0 and 0 < low < high",
                          s.factor, s.low_freq_factor, s.high_freq_factor, s.original_max_position_embeddings));
  }
}

// A tensor the model does not expect that is still fine to skip: lm_head.weight of a tied model
// (transformers ties it to embed_tokens as well) and old transformers' rotary inv_freq buffers.
bool ignored_tensor(const std::string& name) {
  const std::string inv_freq = "rotary_emb.inv_freq";
  if (name.size() >= inv_freq.size() && name.compare(name.size() - inv_freq.size(), inv_freq.size(), inv_freq) == 0) {
    return true;
  }
  return name == "lm_head.weight";
}

}  // namespace

std::string resolve_model_folder(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) throw Error(strprintf("%s %s: no such directory", what.c_str(), path.c_str()));
  std::string folder = path;
  if (read_latest_iteration(path)) folder = resolve_checkpoint(path);
  if (!fs::exists(folder + "/" + kConfigFile, ec)) {
    throw Error(
        strprintf("%s %s: no %s there; give a Hugging Face Llama folder (config.json + *.safetensors, as "
                  "save_pretrained writes it) or a stepgraph checkpoint folder",
                  what.c_str(), folder.c_str(), kConfigFile));
  }
  return folder;
}

HfModelConfig read_hf_config(const std::string& folder) {
  HfModelConfig out;
  out.path = folder + "/" + kConfigFile;
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(read_text_file(out.path));
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(strprintf("%s is not valid JSON: %s", out.path.c_str(), e.what()));
  }
  if (!json.is_object()) throw Error(out.path + " is not a JSON object");
  const ConfigReader c(json, out.path);
  const std::string model_type = c.string("model_type", "llama");
  if (model_type != "llama") {
    c.fail("model_type", "= \"" + model_type + "\": stepgraph loads Llama folders (LlamaForCausalLM) only");
  }
  const std::string act = c.string("hidden_act", "silu");
  if (act != "silu") c.fail("hidden_act", "= \"" + act + "\": the Llama MLP here is SwiGLU (silu)");
  for (const char* bias : {"attention_bias", "mlp_bias"}) {
    if (c.boolean(bias, false)) c.fail(bias, "= true: stepgraph's Llama has no biases");
  }
  model::ModelSpec& s = out.spec;
  s.vocab_size = c.integer("vocab_size");
  s.hidden_size = c.integer("hidden_size");
  s.ffn_hidden_size = c.integer("intermediate_size");
  s.num_layers = c.integer("num_hidden_layers");
  s.num_attention_heads = c.integer("num_attention_heads");
  s.num_query_groups = c.integer("num_key_value_heads", s.num_attention_heads);
  if (s.hidden_size % s.num_attention_heads != 0) {
    c.fail("hidden_size",
           strprintf("= %lld is not a multiple of num_attention_heads = %lld", static_cast<long long>(s.hidden_size),
                     static_cast<long long>(s.num_attention_heads)));
  }
  if (c.has("head_dim") && c.integer("head_dim") != s.head_dim()) {
    c.fail("head_dim", strprintf("= %lld, but stepgraph's attention uses hidden_size / num_attention_heads = %lld",
                                 static_cast<long long>(c.integer("head_dim")), static_cast<long long>(s.head_dim())));
  }
  s.layernorm_epsilon = c.number("rms_norm_eps", 1e-6);
  s.share_embeddings_and_output_weights = c.boolean("tie_word_embeddings", false);
  s.init_method_std = c.number("initializer_range", 0.02);
  read_rope(c, s);
  out.max_position_embeddings = c.integer("max_position_embeddings", 2048);
  s.seq_length = out.max_position_embeddings;
  out.dtype = c.string("torch_dtype", c.string("dtype", ""));
  if (c.has("eos_token_id")) {
    const auto& e = json["eos_token_id"];
    if (e.is_number_integer()) out.eos_token_ids.push_back(e.get<int64_t>());
    if (e.is_array()) {
      for (const auto& x : e) {
        if (x.is_number_integer()) out.eos_token_ids.push_back(x.get<int64_t>());
      }
    }
  }
  return out;
}

std::vector<std::string> weight_files(const std::string& folder, WeightSource source) {
  std::error_code ec;
  if (source == WeightSource::main_params && fs::exists(folder + "/" + kOptimizerMainParamsFile, ec)) {
    return {folder + "/" + kOptimizerMainParamsFile};
  }
  const std::string index = folder + "/" + kIndexFile;
  if (fs::exists(index, ec)) {
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(read_text_file(index));
    } catch (const nlohmann::json::parse_error& e) {
      throw Error(strprintf("%s is not valid JSON: %s", index.c_str(), e.what()));
    }
    if (!json.contains("weight_map") || !json["weight_map"].is_object()) {
      throw Error(index + ": no \"weight_map\" object (it maps each tensor name to its shard file)");
    }
    std::set<std::string> shards;
    for (const auto& [name, file] : json["weight_map"].items()) {
      if (!file.is_string())
        throw Error(strprintf("%s: weight_map[\"%s\"] is not a file name", index.c_str(), name.c_str()));
      shards.insert(file.get<std::string>());
    }
    std::vector<std::string> out;
    for (const auto& shard : shards) out.push_back(folder + "/" + shard);
    return out;
  }
  if (fs::exists(folder + "/" + kModelFile, ec)) return {folder + "/" + kModelFile};
  throw Error(
      strprintf("%s has no %s or %s (stepgraph reads safetensors weights; convert a pytorch_model.bin with "
                "transformers: from_pretrained(...).save_pretrained(DIR))",
                folder.c_str(), kModelFile, kIndexFile));
}

std::string load_hf_weights(const std::string& folder, const model::ModelLayout& layout, std::vector<float>& weights,
                            WeightSource source) {
  const std::vector<std::string> paths = weight_files(folder, source);
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, const SafetensorsFile::Entry*> found;
  std::map<std::string, std::string> file_of;
  std::vector<std::string> diffs;
  std::set<std::string> dtypes;
  int ignored = 0;
  for (const auto& path : paths) {
    files.push_back(std::make_unique<SafetensorsFile>(path));
    for (const auto& e : files.back()->tensors()) {
      if (found.count(e.name) != 0) {
        diffs.push_back(
            strprintf("duplicate  %s: in %s and %s", e.name.c_str(), file_of[e.name].c_str(), path.c_str()));
        continue;
      }
      found[e.name] = &e;
      file_of[e.name] = path;
    }
  }
  std::set<std::string> expected;
  for (const auto& t : layout.tensors()) {
    expected.insert(t.name);
    const auto it = found.find(t.name);
    if (it == found.end()) {
      diffs.push_back(strprintf("missing    %s: expected %s", t.name.c_str(), shape_string(t.shape).c_str()));
      continue;
    }
    const auto& e = *it->second;
    if (e.shape != t.shape) {
      diffs.push_back(strprintf("different  %s: checkpoint %s, expected %s", t.name.c_str(),
                                shape_string(e.shape).c_str(), shape_string(t.shape).c_str()));
    } else if (e.dtype != TensorDtype::BF16 && e.dtype != TensorDtype::F32) {
      diffs.push_back(strprintf("dtype      %s: %s; weights must be BF16 or F32", t.name.c_str(), dtype_name(e.dtype)));
    }
    dtypes.insert(dtype_name(e.dtype));
  }
  for (const auto& [name, entry] : found) {
    if (expected.count(name) != 0) continue;
    if (ignored_tensor(name)) {
      ++ignored;
      continue;
    }
    diffs.push_back(strprintf("unexpected %s: checkpoint %s %s", name.c_str(), dtype_name(entry->dtype),
                              shape_string(entry->shape).c_str()));
  }
  if (!diffs.empty()) {
    std::string msg =
        strprintf("%s does not hold the model its config.json describes: %zu tensor%s differ%s:", folder.c_str(),
                  diffs.size(), diffs.size() == 1 ? "" : "s", diffs.size() == 1 ? "s" : "");
    for (const auto& d : diffs) msg += "\n  " + d;
    throw Error(msg);
  }
  weights.assign(static_cast<size_t>(layout.total()), 0.0f);
  for (const auto& t : layout.tensors()) {
    const auto& e = *found.at(t.name);
    float* dst = weights.data() + t.offset;
    if (e.dtype == TensorDtype::F32) {
      std::memcpy(dst, e.data, static_cast<size_t>(t.numel) * 4);
    } else {
      for (int64_t i = 0; i < t.numel; ++i) {
        uint16_t bits;
        std::memcpy(&bits, e.data + 2 * i, 2);
        dst[i] = bf16_bits_to_float(bits);
      }
    }
  }
  std::string what = paths.size() == 1 ? fs::path(paths[0]).filename().string()
                                       : strprintf("%zu shards of %s", paths.size(), kIndexFile);
  return strprintf(
      "%s (%s)%s", what.c_str(), join(std::vector<std::string>(dtypes.begin(), dtypes.end()), ", ").c_str(),
      ignored > 0 ? strprintf(", %d tensor(s) not used (tied lm_head / rotary buffers)", ignored).c_str() : "");
}

}  // namespace sg::checkpoint

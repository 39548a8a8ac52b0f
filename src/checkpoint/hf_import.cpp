#include "checkpoint/hf_import.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/durable_io.h"
#include "checkpoint/finite_check.h"
#include "checkpoint/hf_config_reader.h"
#include "checkpoint/hf_fused_tensors.h"
#include "checkpoint/python_json.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/paths.h"
#include "core/strings.h"
#include "model/hf_families.h"
#include "model/stack.h"

namespace sg::checkpoint {

namespace fs = std::filesystem;
using detail::ConfigReader;
using detail::read_longrope;
using detail::read_mixtral_experts;
using detail::read_qwen_attention;
using detail::read_qwen_moe_experts;
using detail::read_rotary_dim;
using detail::read_sliding_window;

namespace {

constexpr const char* kIndexFile = "model.safetensors.index.json";

std::string fmt(double v) {
  return strprintf("%g", v);
}

// A message of a head line and one indented line per item: every bad entry at once, not only the first.
[[noreturn]] void throw_listed(const std::string& head, const std::vector<std::string>& items) {
  std::string message = head;
  for (const std::string& item : items) message += "\n  " + item;
  throw Error(message);
}

// RoPE: transformers 5 writes rope_parameters {rope_type, rope_theta, factor, ...}; transformers 4
// rope_theta and rope_scaling {rope_type (or type), factor, ...}. `default_theta`: the model class's default for a
// config.json without rope_theta (LlamaConfig 10000, MixtralConfig 1e6). LongRoPE's object is returned, with its key in
// `longrope_key`, to be read once the rotated dimensions and max_position_embeddings are known (read_longrope); null
// for the other types. `phi3`: Phi3Config reads the legacy types "su" and "yarn" as longrope.
const nlohmann::json* read_rope(const ConfigReader& c, model::ModelSpec& spec, double default_theta, bool phi3,
                                std::string& longrope_key) {
  const nlohmann::json& j = c.json();
  const nlohmann::json* scaling = nullptr;
  std::string key = "rope_scaling";
  spec.rotary_base = c.number("rope_theta", default_theta);
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
  if (scaling == nullptr) return nullptr;
  std::string type = "default";
  for (const char* name : {"rope_type", "type"}) {
    if (scaling->contains(name) && (*scaling)[name].is_string()) {
      type = (*scaling)[name].get<std::string>();
      key += std::string(".") + name;
      break;
    }
  }
  if (type == "default") return nullptr;
  if (type == "longrope" || (phi3 && (type == "su" || type == "yarn"))) {
    longrope_key = key.substr(0, key.find('.'));
    return scaling;
  }
  if (type != "llama3") {
    c.fail(key, "= \"" + type +
                    "\": stepgraph implements the default, llama3 and longrope RoPE only (no linear, dynamic or "
                    "yarn scaling)");
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
  return nullptr;
}

// config.json's model_type, "" where the folder has none or it is unreadable (read_hf_config reports that).
std::string folder_model_type(const std::string& folder) {
  const std::string path = folder + "/" + kConfigFile;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return "";
  try {
    const nlohmann::json json = parse_python_json(read_text_file(path), path);
    return json.is_object() && json.contains("model_type") && json["model_type"].is_string()
               ? json["model_type"].get<std::string>()
               : "";
  } catch (const Error&) {
    return "";
  }
}

// eos_token_id: a number or a list.
void read_eos_token_ids(const nlohmann::json& json, HfModelConfig& out) {
  if (!json.is_object() || !json.contains("eos_token_id")) return;
  const auto add = [&](const nlohmann::json& x) {
    if (!x.is_number_integer()) return;
    const int64_t id = x.get<int64_t>();
    if (std::find(out.eos_token_ids.begin(), out.eos_token_ids.end(), id) == out.eos_token_ids.end()) {
      out.eos_token_ids.push_back(id);
    }
  };
  const auto& e = json["eos_token_id"];
  add(e);
  if (e.is_array()) {
    for (const auto& x : e) add(x);
  }
}

// A tensor the model does not expect that is still fine to skip: lm_head.weight of a tied model
// (transformers ties it to embed_tokens as well), old transformers' rotary inv_freq buffers, and a NemotronH
// folder's multi-token-prediction layers (mtp.*), which transformers skips too: they are not the model's forward.
bool ignored_tensor(const std::string& name) {
  if (name.rfind("mtp.", 0) == 0) return true;
  const std::string inv_freq = "rotary_emb.inv_freq";
  if (name.size() >= inv_freq.size() && name.compare(name.size() - inv_freq.size(), inv_freq.size(), inv_freq) == 0) {
    return true;
  }
  return name == model::kLmHeadName;
}

}  // namespace

std::string resolve_model_folder(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw Error(strprintf("%s %s: no such directory", what.c_str(), describe_path(path).c_str()));
  }
  if (!fs::is_directory(path, ec)) {
    throw Error(
        strprintf("%s %s: not a directory; give the model's folder (a Hugging Face Llama folder, or a "
                  "stepgraph checkpoint directory or one of its iter_NNNNNNN folders)",
                  what.c_str(), path.c_str()));
  }
  std::string folder = path;
  if (read_latest_iteration(path)) folder = resolve_checkpoint(path, what);
  if (!fs::exists(folder + "/" + kConfigFile, ec)) {
    if (is_checkpoint_folder(folder)) {
      // hf_model_config writes none for a model no transformers class loads (MoE and hybrid stacks beyond
      // Qwen2-MoE, Qwen3-MoE, Mixtral and NemotronH): such a checkpoint is no Llama folder either.
      throw Error(strprintf("%s %s: a stepgraph checkpoint without %s (its model has no transformers class, so it is "
                            "no " SG_HF_FAMILIES " model): %s takes those folders only; continue training this "
                            "checkpoint with checkpoint.load=%s",
                            what.c_str(), folder.c_str(), kConfigFile, what.c_str(), path.c_str()));
    }
    throw Error(strprintf(
        "%s %s: no %s there; give a Hugging Face " SG_HF_FAMILIES
        " folder (config.json + *.safetensors, as save_pretrained writes it) or a stepgraph checkpoint folder%s",
        what.c_str(), folder.c_str(), kConfigFile, iteration_folders_hint(folder).c_str()));
  }
  // A stepgraph checkpoint's config.json (and tokenizer files) are read before its weights: verified first,
  // so a damaged one is reported as such, not as a shape that differs. The weights are verified where they
  // are read (load_hf_weights), which also warns about a checkpoint without checksums.
  if (is_checkpoint_folder(folder)) {
    verify_checkpoint_folder(
        folder, {.what = what, .tensor_files = {}, .all_tensor_files = false, .warn_without_checksums = false});
  }
  return folder;
}

HfModelConfig read_hf_config(const std::string& folder) {
  HfModelConfig out;
  out.path = folder + "/" + kConfigFile;
  // Python's Infinity/NaN (a NemotronH's time_step_limit) tagged as transformers 5 writes them.
  const nlohmann::json json = parse_python_json(read_text_file(out.path), out.path);
  if (!json.is_object()) throw Error(out.path + " is not a JSON object");
  const ConfigReader c(json, out.path);
  if (!c.has("model_type")) {
    // transformers' AutoConfig refuses a config.json without it; guessing Llama would run another model's weights.
    c.fail("model_type",
           "is missing: transformers needs it to pick the model class; add \"model_type\": \"llama\" "
           "if this is a Llama model (LlamaForCausalLM)");
  }
  const std::string model_type = c.string("model_type", "");
  out.dtype = c.string("torch_dtype", c.string("dtype", ""));
  read_eos_token_ids(json, out);
  // transformers' generate() stops at generation_config.json's eos_token_id where the folder has one (Llama 3
  // Instruct lists its end-of-turn token only there): both files' ids stop a sequence.
  const std::string generation_config = folder + "/" + kGenerationConfigFile;
  if (std::filesystem::exists(generation_config)) {
    read_eos_token_ids(parse_python_json(read_text_file(generation_config), generation_config), out);
  }
  if (model_type == "nemotron_h") {
    out.architecture = "NemotronHForCausalLM";
    detail::read_nemotron_h_config(c, out);
    return out;
  }
  const bool mistral = model_type == "mistral";  // Llama's blocks, attention within a sliding window (read below)
  // Llama's blocks with q, k and v in one qkv_proj and gate and up in one gate_up_proj (hf_fused_tensors.h), and
  // Mistral's sliding window where config.json sets one.
  const bool phi3 = model_type == "phi3";
  const bool mixtral = model_type == "mixtral";  // Llama's attention and norms, every MLP a SwiGLU MoE
  const bool qwen3_moe = model_type == "qwen3_moe";       // Qwen3 with softmax-routed SwiGLU experts
  const bool qwen3 = model_type == "qwen3" || qwen3_moe;  // Llama with a query and a key norm per head
  // Qwen2 with softmax-routed SwiGLU experts and a gated shared expert; q, k and v biased as qkv_bias says.
  const bool qwen2_moe = model_type == "qwen2_moe";
  const bool qwen2 = model_type == "qwen2" || qwen2_moe;  // Llama with a bias on q_proj, k_proj and v_proj
  if (model_type != "llama" && !mistral && !phi3 && !mixtral && !qwen3 && !qwen2) {
    c.fail("model_type", "= \"" + model_type +
                             "\": checkpoint.pretrained_checkpoint takes Llama (model_type \"llama\"), Mistral "
                             "(\"mistral\"), Phi-3 (\"phi3\"), Qwen2 (\"qwen2\", \"qwen2_moe\"), Qwen3 (\"qwen3\", "
                             "\"qwen3_moe\"), Mixtral "
                             "(\"mixtral\") and NemotronH (\"nemotron_h\") folders, as does generate");
  }
  out.architecture = mistral     ? "MistralForCausalLM"
                     : phi3      ? "Phi3ForCausalLM"
                     : mixtral   ? "MixtralForCausalLM"
                     : qwen3_moe ? "Qwen3MoeForCausalLM"
                     : qwen3     ? "Qwen3ForCausalLM"
                     : qwen2_moe ? "Qwen2MoeForCausalLM"
                     : qwen2     ? "Qwen2ForCausalLM"
                                 : "LlamaForCausalLM";
  const std::string act = c.string("hidden_act", "silu");
  if (act != "silu") c.fail("hidden_act", "= \"" + act + "\": the Llama MLP here is SwiGLU (silu)");
  // Llama's biases are Megatron's add_bias_linear: on every linear of attention and the MLP, so both keys or neither.
  const bool llama = out.architecture == "LlamaForCausalLM";
  const bool attention_bias = c.boolean("attention_bias", false), mlp_bias = c.boolean("mlp_bias", false);
  for (const char* bias : {"attention_bias", "mlp_bias"}) {
    if (!c.boolean(bias, false)) continue;
    if (!llama) {
      c.fail(bias, "= true: stepgraph's " + out.architecture +
                       " has no such biases (its linear biases are Llama's attention_bias with mlp_bias, and Qwen2's "
                       "on q_proj, k_proj and v_proj)");
    }
    if (attention_bias != mlp_bias) {
      c.fail(bias, std::string("= true without ") + (attention_bias ? "mlp_bias" : "attention_bias") +
                       ": stepgraph's linear biases are Megatron's model.add_bias_linear, on attention and the MLP "
                       "together (or model.add_qkv_bias: q_proj, k_proj and v_proj alone, a Qwen2 folder)");
    }
  }
  model::ModelSpec& s = out.spec;
  s.qk_layernorm = qwen3;
  s.add_qkv_bias = qwen2_moe ? c.boolean("qkv_bias", true) : qwen2;
  s.add_bias_linear = llama && attention_bias && mlp_bias;
  if (qwen3 || qwen2) read_qwen_attention(c);
  s.vocab_size = c.integer("vocab_size");
  s.hidden_size = c.integer("hidden_size");
  s.ffn_hidden_size = c.integer("intermediate_size");
  s.num_layers = c.integer("num_hidden_layers");
  s.num_attention_heads = c.integer("num_attention_heads");
  // Keys left out take the model class's defaults: MixtralConfig's and MistralConfig's 8 key/value heads,
  // Qwen2Config's and Qwen3Config's 32, Qwen2MoeConfig's 16, Qwen3MoeConfig's 4, LlamaConfig's one per head.
  s.num_query_groups = c.integer("num_key_value_heads", mixtral || mistral ? 8
                                                        : qwen3_moe        ? 4
                                                        : qwen2_moe        ? 16
                                                        : qwen3 || qwen2   ? 32
                                                                           : s.num_attention_heads);
  if (s.num_attention_heads % s.num_query_groups != 0) {
    c.fail("num_key_value_heads",
           strprintf("= %lld%s does not divide num_attention_heads = %lld: grouped-query attention shares each "
                     "key/value head among a whole number of query heads",
                     static_cast<long long>(s.num_query_groups),
                     c.has("num_key_value_heads") ? "" : " (absent: the model class's default)",
                     static_cast<long long>(s.num_attention_heads)));
  }
  if (s.vocab_size > INT32_MAX) {
    c.fail("vocab_size",
           strprintf("= %lld: token ids are 32-bit here; at most %d", static_cast<long long>(s.vocab_size), INT32_MAX));
  }
  if (c.has("head_dim") || (qwen3 && !qwen3_moe)) {
    // Megatron's kv_channels, set only where it is not hidden_size / num_attention_heads (kv_channels' null).
    const int64_t head_dim = c.integer("head_dim", 128);  // Qwen3Config's default (Qwen3-MoE's: hidden / heads)
    if (s.hidden_size % s.num_attention_heads != 0 || head_dim != s.hidden_size / s.num_attention_heads) {
      s.kv_channels = head_dim;
    }
  } else if (s.hidden_size % s.num_attention_heads != 0) {
    c.fail("hidden_size",
           strprintf("= %lld is not a multiple of num_attention_heads = %lld", static_cast<long long>(s.hidden_size),
                     static_cast<long long>(s.num_attention_heads)));
  }
  if (s.head_dim() % 2 != 0) {
    // Rotate-half RoPE rotates pairs of a head's dimensions.
    if (c.has("head_dim"))
      c.fail("head_dim", strprintf("= %lld: RoPE needs an even head dimension", static_cast<long long>(s.head_dim())));
    c.fail("hidden_size",
           strprintf("/ num_attention_heads = %lld / %lld = %lld: RoPE needs an even head dimension",
                     static_cast<long long>(s.hidden_size), static_cast<long long>(s.num_attention_heads),
                     static_cast<long long>(s.head_dim())));
  }
  // MixtralConfig's and Phi3Config's; LlamaConfig's, Qwen2's, Qwen3's.
  s.layernorm_epsilon = c.number("rms_norm_eps", mixtral || phi3 ? 1e-5 : 1e-6);
  if (!(s.layernorm_epsilon > 0.0)) {
    c.fail("rms_norm_eps",
           "= " + fmt(s.layernorm_epsilon) + ": must be positive (RMSNorm divides by sqrt(mean + eps))");
  }
  s.share_embeddings_and_output_weights = c.boolean("tie_word_embeddings", false);
  s.init_method_std = c.number("initializer_range", 0.02);
  if (!(s.init_method_std > 0.0)) {
    c.fail("initializer_range", "= " + fmt(s.init_method_std) + ": must be positive");
  }
  // A key config.json leaves out takes the model class's default, as transformers reads it (save_pretrained writes
  // them all; a hand-written file may not).
  std::string longrope_key;
  const nlohmann::json* longrope = read_rope(c, s, mixtral ? 1e6 : 10000.0, phi3, longrope_key);
  if (mixtral) read_mixtral_experts(c, s);
  if (mistral) out.sliding_window = read_sliding_window(c, 4096);
  if (phi3) {
    out.sliding_window = read_sliding_window(c, std::nullopt);
    s.rotary_dim = read_rotary_dim(c, s.head_dim());
  }
  if (qwen3_moe || qwen2_moe) read_qwen_moe_experts(c, s, qwen2_moe);
  out.max_position_embeddings = c.integer("max_position_embeddings", mixtral || mistral ? 4096 * 32
                                                                     : qwen3 || qwen2   ? 32768
                                                                     : phi3             ? 4096
                                                                                        : 2048);
  s.seq_length = out.max_position_embeddings;
  if (longrope != nullptr) {
    s.longrope = read_longrope(c, *longrope, longrope_key, s.rope_rotated_dims(), out.max_position_embeddings, phi3);
    s.rope_scaling = s.longrope.scaling_for(s.seq_length);
  }
  return out;
}

namespace {

// The weight files of a folder; for shards, the index and its weight_map.
struct WeightFiles {
  std::vector<std::string> paths;
  std::string index;                              // FOLDER/model.safetensors.index.json; "" without shards
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
};

// The file a stepgraph checkpoint's weights are read from (its saves write both, never shards).
const char* checkpoint_weight_file(WeightSource source) {
  return source == WeightSource::main_params ? kOptimizerMainParamsFile : kModelFile;
}

WeightFiles find_weight_files(const std::string& folder, WeightSource source) {
  std::error_code ec;
  const std::string index = folder + "/" + kIndexFile;
  const std::string single = folder + "/" + kModelFile;
  const bool has_index = fs::exists(index, ec), has_single = fs::exists(single, ec);
  if (has_index && has_single) {
    // transformers (modeling_utils) takes model.safetensors before an index; reading the shards here would run
    // other weights than transformers does from the same folder.
    throw Error(
        strprintf("%s holds both %s and %s: transformers loads %s (it looks for it first) and would ignore "
                  "the shards the index names, so which weights the folder holds is ambiguous. Remove the "
                  "one not meant: a stale %s left by an earlier save, or %s and its shards",
                  folder.c_str(), kModelFile, kIndexFile, kModelFile, kModelFile, kIndexFile));
  }
  if (is_checkpoint_folder(folder)) {
    const std::string file = folder + "/" + checkpoint_weight_file(source);
    if (!fs::exists(file, ec)) {
      throw Error(
          strprintf("%s is missing: %s is a stepgraph checkpoint (it holds %s), and every save writes %s; "
                    "the folder is incomplete (a partial copy?). Copy the whole iteration folder, or name "
                    "another iteration",
                    file.c_str(), folder.c_str(), kTrainStateFile, checkpoint_weight_file(source)));
    }
    return {{file}, "", {}};
  }
  if (source == WeightSource::main_params && fs::exists(folder + "/" + kOptimizerMainParamsFile, ec)) {
    return {{folder + "/" + kOptimizerMainParamsFile}, "", {}};
  }
  if (has_index) {
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(read_text_file(index));
    } catch (const nlohmann::json::exception& e) {  // parse_error; out_of_range for a number past double
      throw Error(strprintf("%s is not valid JSON: %s", index.c_str(), e.what()));
    }
    if (!json.is_object() || !json.contains("weight_map") || !json["weight_map"].is_object()) {
      throw Error(index + ": no \"weight_map\" object (it maps each tensor name to its shard file)");
    }
    WeightFiles out{{}, index, {}};
    std::map<std::string, std::vector<std::string>> tensors_of;  // shard -> tensors
    std::vector<std::string> bad_names;
    for (const auto& [name, file] : json["weight_map"].items()) {
      if (!file.is_string()) {
        throw Error(strprintf("%s: weight_map[\"%s\"] = %s is not a file name", index.c_str(), name.c_str(),
                              file.dump().c_str()));
      }
      const std::string shard = file.get<std::string>();
      // A shard is a file beside the index: an absolute path or ../ would read outside the folder.
      if (shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos) {
        bad_names.push_back(strprintf("%s -> \"%s\"", name.c_str(), shard.c_str()));
        continue;
      }
      out.weight_map[name] = shard;
      tensors_of[shard].push_back(name);
    }
    if (!bad_names.empty()) {
      throw_listed(strprintf("%s: %zu weight_map entr%s not the name of a file in %s (shard names are file "
                             "names inside the model's folder, as save_pretrained writes them):",
                             index.c_str(), bad_names.size(), bad_names.size() == 1 ? "y is" : "ies are",
                             folder.c_str()),
                   bad_names);
    }
    if (tensors_of.empty()) throw Error(index + ": \"weight_map\" is empty; it must map each tensor to its shard");
    std::vector<std::string> missing;
    for (const auto& [shard, names] : tensors_of) {
      const std::string path = folder + "/" + shard;
      if (!fs::exists(path, ec)) {
        missing.push_back(strprintf("%s (%zu tensor%s, e.g. %s)", shard.c_str(), names.size(),
                                    names.size() == 1 ? "" : "s", names.front().c_str()));
      }
      out.paths.push_back(path);
    }
    if (!missing.empty()) {
      throw_listed(strprintf("%s lists %zu shard%s missing from %s (an incomplete download or copy; fetch "
                             "the model's files again):",
                             index.c_str(), missing.size(), missing.size() == 1 ? "" : "s", folder.c_str()),
                   missing);
    }
    return out;
  }
  if (has_single) return {{single}, "", {}};
  throw Error(
      strprintf("%s has no %s or %s (stepgraph reads safetensors weights; convert a pytorch_model.bin with "
                "transformers: from_pretrained(...).save_pretrained(DIR))",
                folder.c_str(), kModelFile, kIndexFile));
}

// The shards must hold exactly what the index says: transformers looks tensors up through weight_map.
void check_weight_map(const WeightFiles& w, const std::map<std::string, std::string>& file_of) {
  std::vector<std::string> diffs;
  for (const auto& [name, path] : file_of) {
    const std::string shard = fs::path(path).filename().string();
    const auto it = w.weight_map.find(name);
    if (it == w.weight_map.end()) {
      diffs.push_back(strprintf("not in the index  %s: in %s", name.c_str(), shard.c_str()));
    } else if (it->second != shard) {
      diffs.push_back(strprintf("elsewhere         %s: the index maps it to %s, but it is in %s", name.c_str(),
                                it->second.c_str(), shard.c_str()));
    }
  }
  for (const auto& [name, shard] : w.weight_map) {
    if (file_of.count(name) == 0) {
      diffs.push_back(strprintf("in no shard       %s: the index maps it to %s, which does not hold it", name.c_str(),
                                shard.c_str()));
    }
  }
  if (diffs.empty()) return;
  throw_listed(strprintf("%s does not match its shards (%zu difference%s): the folder mixes files of different "
                         "saves; fetch or save the model again",
                         w.index.c_str(), diffs.size(), diffs.size() == 1 ? "" : "s"),
               diffs);
}

}  // namespace

std::vector<std::string> weight_files(const std::string& folder, WeightSource source) {
  return find_weight_files(folder, source).paths;
}

std::string load_hf_weights(const std::string& folder, const model::ModelLayout& layout, std::vector<float>& weights,
                            WeightSource source, const std::string& what) {
  MappedHfWeights mapped = map_hf_weights(folder, layout, source, what);
  weights = mapped.view.to_vector();
  return mapped.description;
}

MappedHfWeights map_hf_weights(const std::string& folder, const model::ModelLayout& layout, WeightSource source,
                               const std::string& what) {
  const bool own_checkpoint = is_checkpoint_folder(folder);
  if (own_checkpoint) {
    verify_checkpoint_folder(
        folder, {.what = what, .tensor_files = {checkpoint_weight_file(source)}, .all_tensor_files = false});
  }
  const WeightFiles w = find_weight_files(folder, source);
  const std::vector<std::string>& paths = w.paths;
  MappedHfWeights out;
  std::vector<std::unique_ptr<SafetensorsFile>>& files = out.files;
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
  if (!w.index.empty() && diffs.empty()) check_weight_map(w, file_of);
  std::deque<SafetensorsFile::Entry> fused_parts;  // a family's fused tensors' rows, named as the model's tensors
  split_fused_tensors(folder_model_type(folder), layout, found, file_of, fused_parts, diffs);
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
    } else if (!is_floating(e.dtype)) {
      diffs.push_back(
          strprintf("dtype      %s: %s; weights must be F32, BF16 or F16", t.name.c_str(), dtype_name(e.dtype)));
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
    throw_listed(strprintf("%s does not hold the model its config.json describes: %zu tensor%s differ%s:",
                           folder.c_str(), diffs.size(), diffs.size() == 1 ? "" : "s", diffs.size() == 1 ? "s" : ""),
                 diffs);
  }
  // A NaN or Inf would run (training: one step, then blamed on the learning rate; generation: argmax of NaN
  // logits is id 0) instead of naming the damaged tensor. Checked per file, before anything is copied.
  for (const auto& path : paths) {
    std::vector<TensorRef> refs;
    for (const auto& t : layout.tensors()) {
      const auto& e = *found.at(t.name);
      if (file_of.at(t.name) == path) refs.push_back({t.name, e.dtype, e.shape, e.data});
    }
    const auto bad = find_nonfinite(refs);
    if (!bad) continue;
    if (own_checkpoint) {
      throw Error(
          strprintf("%s %s: checkpoint file %s holds non-finite values: %s. stepgraph never saves a "
                    "non-finite state, so the file is damaged or comes from a diverged run. %s",
                    what.c_str(), folder.c_str(), path.c_str(), describe(*bad).c_str(),
                    damaged_checkpoint_advice(folder, what).c_str()));
    }
    throw Error(
        strprintf("%s %s: %s holds non-finite values: %s. The model would compute NaN from them: the file "
                  "is damaged, or the weights come from a diverged run or overflowed a conversion to a "
                  "narrower dtype; use an intact copy of the weights",
                  what.c_str(), folder.c_str(), path.c_str(), describe(*bad).c_str()));
  }
  // One piece per tensor, where the file holds it (the checks above made each a floating-point tensor of its shape).
  std::vector<model::FlatView::Piece> pieces;
  for (const auto& t : layout.tensors()) {
    const auto& e = *found.at(t.name);
    const model::FlatView::Element element = e.dtype == TensorDtype::F32    ? model::FlatView::Element::f32
                                             : e.dtype == TensorDtype::BF16 ? model::FlatView::Element::bf16
                                                                            : model::FlatView::Element::f16;
    pieces.push_back(
        {.offset = t.offset, .count = t.numel, .data = reinterpret_cast<const std::byte*>(e.data), .element = element});
  }
  out.view = model::FlatView(layout.total(), std::move(pieces));
  std::string read = paths.size() == 1 ? fs::path(paths[0]).filename().string()
                                       : strprintf("%zu shards of %s", paths.size(), kIndexFile);
  out.description = strprintf(
      "%s (%s)%s", read.c_str(), join(std::vector<std::string>(dtypes.begin(), dtypes.end()), ", ").c_str(),
      ignored > 0 ? strprintf(", %d tensor(s) not used (tied lm_head / rotary buffers)", ignored).c_str() : "");
  return out;
}

}  // namespace sg::checkpoint

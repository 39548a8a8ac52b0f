#include "data/hf_tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "core/strings.h"

namespace sg::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(strprintf("cannot read %s: %s", path.c_str(), std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::parse_error& e) {
    throw Error(strprintf("%s is not valid JSON: %s", path.c_str(), e.what()));
  }
}

// transformers writes special tokens as "text" or as {"content": "text", ...} (AddedToken).
std::optional<std::string> token_text(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return value["content"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<std::string> eos_in(const std::string& path) {
  if (!fs::is_regular_file(path)) return std::nullopt;
  const json j = read_json(path);
  if (!j.is_object()) throw Error(path + " is not a JSON object");
  if (!j.contains("eos_token")) return std::nullopt;
  return token_text(j["eos_token"]);
}

}  // namespace

std::string HfTokenizerInfo::describe() const {
  std::string text = strprintf("%s: %s, %lld tokens (%lld in the model vocabulary, %lld added)", dir.c_str(),
                               model_type.empty() ? "tokenizer" : model_type.c_str(),
                               static_cast<long long>(vocab_size), static_cast<long long>(model_tokens),
                               static_cast<long long>(added_tokens));
  text += eod_id >= 0 ? strprintf(", EOD %s = %d", eos_token.c_str(), eod_id) : std::string(", no eos token");
  if (has_additional_chat_templates) {
    text += strprintf("; its %s/ folder is not copied into checkpoints (copy it beside their config.json by hand)",
                      kAdditionalChatTemplatesDir);
  }
  return text;
}

HfTokenizerInfo read_hf_tokenizer(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw Error(strprintf("tokenizer.tokenizer_model %s is not a folder; train one with `python3 "
                          "tools/train_tokenizer.py --input FILE.jsonl --vocab-size N --output %s`, or give a "
                          "Hugging Face tokenizer folder (with tokenizer.json)",
                          dir.c_str(), dir.c_str()));
  }
  HfTokenizerInfo info;
  info.dir = dir;
  const std::string tokenizer_path = (fs::path(dir) / kTokenizerJson).string();
  if (!fs::is_regular_file(tokenizer_path, ec)) {
    throw Error(strprintf("tokenizer folder %s has no %s: stepgraph reads Hugging Face fast tokenizers "
                          "(tools/train_tokenizer.py writes one; for a slow-only tokenizer, save it with "
                          "transformers' AutoTokenizer(use_fast=True).save_pretrained)",
                          dir.c_str(), kTokenizerJson));
  }
  const json tokenizer = read_json(tokenizer_path);
  const auto shape_error = [&](const std::string& what) {
    return Error(strprintf("%s: %s; is it a Hugging Face tokenizers file?", tokenizer_path.c_str(), what.c_str()));
  };
  if (!tokenizer.is_object() || !tokenizer.contains("model") || !tokenizer["model"].is_object()) {
    throw shape_error("no \"model\" object");
  }
  const json& model = tokenizer["model"];
  if (model.contains("type") && model["type"].is_string()) info.model_type = model["type"].get<std::string>();
  if (!model.contains("vocab")) throw shape_error("model has no \"vocab\"");

  // token -> id of the model vocabulary (a map for BPE/WordPiece/WordLevel, a list for Unigram).
  int64_t max_id = -1;
  const json& vocab = model["vocab"];
  const auto id_of_model_token = [&](const std::string& token) -> int64_t {
    if (vocab.is_object()) {
      const auto it = vocab.find(token);
      return it != vocab.end() && it->is_number_integer() ? it->get<int64_t>() : -1;
    }
    for (size_t i = 0; i < vocab.size(); ++i) {
      if (vocab[i].is_array() && !vocab[i].empty() && vocab[i][0] == token) return static_cast<int64_t>(i);
    }
    return -1;
  };
  if (vocab.is_object()) {
    for (const auto& [token, id] : vocab.items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0) {
        throw shape_error("model.vocab[\"" + token + "\"] is not a non-negative integer id");
      }
      max_id = std::max(max_id, id.get<int64_t>());
    }
  } else if (vocab.is_array()) {
    max_id = static_cast<int64_t>(vocab.size()) - 1;
  } else {
    throw shape_error("model.vocab is neither a map nor a list");
  }
  info.model_tokens = static_cast<int64_t>(vocab.size());

  std::vector<std::pair<std::string, int64_t>> added;
  if (tokenizer.contains("added_tokens") && tokenizer["added_tokens"].is_array()) {
    for (const json& t : tokenizer["added_tokens"]) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
          !t["content"].is_string() || t["id"].get<int64_t>() < 0) {
        throw shape_error("an added_tokens entry has no integer \"id\" and string \"content\": " + t.dump());
      }
      added.emplace_back(t["content"].get<std::string>(), t["id"].get<int64_t>());
      max_id = std::max(max_id, added.back().second);
    }
  }
  info.added_tokens = static_cast<int64_t>(added.size());
  info.vocab_size = max_id + 1;
  if (info.vocab_size <= 0) throw shape_error("the vocabulary is empty");

  std::optional<std::string> eos = eos_in((fs::path(dir) / kTokenizerConfigJson).string());
  if (!eos) eos = eos_in((fs::path(dir) / kSpecialTokensMapJson).string());
  if (eos) {
    int64_t id = -1;
    for (const auto& [content, added_id] : added) {
      if (content == *eos) id = added_id;
    }
    if (id < 0) id = id_of_model_token(*eos);
    if (id < 0) {
      throw Error(strprintf("%s names eos_token \"%s\", but %s has no such token", dir.c_str(), eos->c_str(),
                            tokenizer_path.c_str()));
    }
    info.eos_token = *eos;
    info.eod_id = static_cast<int32_t>(id);
  }
  for (const char* name : kTokenizerFiles) {
    const fs::path p = fs::path(dir) / name;
    if (fs::is_regular_file(p, ec)) info.files.push_back(p.string());
  }
  info.has_additional_chat_templates = fs::is_directory(fs::path(dir) / kAdditionalChatTemplatesDir, ec);
  return info;
}

}  // namespace sg::data

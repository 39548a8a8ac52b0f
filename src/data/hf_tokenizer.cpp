#include "data/hf_tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>

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
  } catch (const json::exception& e) {  // parse_error; out_of_range for a number past double (1e999)
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

// The special token `key` (eos_token, bos_token) the JSON file at `path` names; nullopt when the file or the key
// is absent, or the key is null.
std::optional<std::string> special_token_in(const std::string& path, const char* key) {
  if (!fs::is_regular_file(path)) return std::nullopt;
  const json j = read_json(path);
  if (!j.is_object()) throw Error(path + " is not a JSON object");
  if (!j.contains(key)) return std::nullopt;
  return token_text(j[key]);
}

// additional_chat_templates/NAME.jinja of DIR, relative to DIR and by name; none without the folder. Anything
// else in it is refused: transformers would skip it, and the checkpoints would lack what the folder seems to hold.
std::vector<std::string> additional_chat_templates(const std::string& dir) {
  const fs::path folder = fs::path(dir) / kAdditionalChatTemplatesDir;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(folder, ec))) return {};
  if (!fs::is_directory(folder, ec)) {
    throw Error(
        strprintf("%s is not a folder: transformers reads extra chat templates from a folder %s/ of "
                  "NAME%s files; remove it, or make it that folder",
                  folder.c_str(), kAdditionalChatTemplatesDir, kChatTemplateExtension));
  }
  std::vector<std::string> out;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& path = it->path();
    const std::string name = path.filename().string();
    // (".jinja" alone has no extension: a hidden file, no template name.)
    if (path.extension() != kChatTemplateExtension || !fs::is_regular_file(path, ec)) {
      throw Error(strprintf(
          "%s is not a regular NAME%s file: transformers reads only those from %s/ (it would "
          "skip this one, and checkpoints would lack it); move it out of %s, or save the "
          "template as NAME%s",
          path.c_str(), kChatTemplateExtension, kAdditionalChatTemplatesDir, folder.c_str(), kChatTemplateExtension));
    }
    out.push_back((fs::path(kAdditionalChatTemplatesDir) / name).string());
  }
  if (ec) throw Error(strprintf("cannot list %s: %s", folder.c_str(), ec.message().c_str()));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string HfTokenizerInfo::describe() const {
  std::string text = strprintf("%s: %s, %lld tokens (%lld in the model vocabulary, %lld added)", dir.c_str(),
                               model_type.empty() ? "tokenizer" : model_type.c_str(),
                               static_cast<long long>(vocab_size), static_cast<long long>(model_tokens),
                               static_cast<long long>(added_tokens));
  text += eod_id >= 0 ? strprintf(", EOD %s = %d", eos_token.c_str(), eod_id) : std::string(", no eos token");
  if (bos_id >= 0) text += strprintf(", BOS %s = %d", bos_token.c_str(), bos_id);
  return text;
}

HfTokenizerInfo read_hf_tokenizer(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (fs::exists(dir, ec)) {
      // A file named instead of its folder (data/tok/tokenizer.json): the folder is the answer when it
      // holds the tokenizer; otherwise the path is no place to train one into either.
      const fs::path parent = fs::path(dir).parent_path().empty() ? fs::path(".") : fs::path(dir).parent_path();
      if (fs::is_regular_file(parent / kTokenizerJson, ec)) {
        throw Error(strprintf("tokenizer.tokenizer_model %s is a file; give its folder, which holds %s: "
                              "tokenizer.tokenizer_model=%s",
                              dir.c_str(), kTokenizerJson, parent.string().c_str()));
      }
      throw Error(strprintf("tokenizer.tokenizer_model %s is a file, not a folder: give a Hugging Face tokenizer "
                            "folder (the one holding %s), or train one into a new folder with `python3 "
                            "tools/train_tokenizer.py --input FILE.jsonl --vocab-size N --output TOKENIZER_DIR`",
                            dir.c_str(), kTokenizerJson));
    }
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
      // Token ids are 32-bit (INT32_MAX + 1 would also overflow the vocabulary size below).
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        throw shape_error("model.vocab[\"" + token + "\"] = " + id.dump() +
                          " is not a token id (an integer from 0 to 2147483647)");
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
          !t["content"].is_string() || t["id"].get<int64_t>() < 0 || t["id"].get<int64_t>() > INT32_MAX) {
        throw shape_error("an added_tokens entry has no \"id\" from 0 to 2147483647 and string \"content\": " +
                          t.dump());
      }
      added.emplace_back(t["content"].get<std::string>(), t["id"].get<int64_t>());
      max_id = std::max(max_id, added.back().second);
    }
  }
  info.added_tokens = static_cast<int64_t>(added.size());
  info.vocab_size = max_id + 1;
  if (info.vocab_size <= 0) throw shape_error("the vocabulary is empty");

  // A special token's id as transformers resolves it: an added token, else the model vocabulary's.
  const auto id_of_token = [&](const std::string& token) -> int64_t {
    int64_t id = -1;
    for (const auto& [content, added_id] : added) {
      if (content == token) id = added_id;
    }
    return id >= 0 ? id : id_of_model_token(token);
  };
  // tokenizer_config.json's `key`, else special_tokens_map.json's, with its id; {"", -1} when neither names one.
  const auto special_token = [&](const char* key) -> std::pair<std::string, int32_t> {
    std::optional<std::string> token = special_token_in((fs::path(dir) / kTokenizerConfigJson).string(), key);
    if (!token) token = special_token_in((fs::path(dir) / kSpecialTokensMapJson).string(), key);
    if (!token) return {"", -1};
    const int64_t id = id_of_token(*token);
    if (id < 0) {
      throw Error(
          strprintf("%s names %s \"%s\", but %s has no such token; correct the name, or add the token "
                    "to its added_tokens",
                    dir.c_str(), key, token->c_str(), tokenizer_path.c_str()));
    }
    return {*token, static_cast<int32_t>(id)};
  };
  std::tie(info.eos_token, info.eod_id) = special_token("eos_token");
  std::tie(info.bos_token, info.bos_id) = special_token("bos_token");
  for (const char* name : kTokenizerFiles) {
    if (fs::is_regular_file(fs::path(dir) / name, ec)) info.files.emplace_back(name);
  }
  for (std::string& name : additional_chat_templates(dir)) info.files.push_back(std::move(name));
  return info;
}

}  // namespace sg::data

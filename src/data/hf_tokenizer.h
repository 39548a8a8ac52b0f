#pragma once
// What training needs from a Hugging Face tokenizer folder (tokenizer.tokenizer_model), read from its
// JSON files with nlohmann-json — stepgraph never tokenizes text itself (tools/*.py do, with the
// `tokenizers` library):
//   tokenizer.json           model.vocab (a {token: id} map, or Unigram's [[token, score], ...] list)
//                            and added_tokens [{"id", "content"}]: the vocabulary is every id + 1
//   tokenizer_config.json    eos_token (a string or {"content": ...}): the end-of-document (EOD) token
//   special_tokens_map.json  eos_token, when tokenizer_config.json has none
// The three files are what a checkpoint folder needs next to config.json for
// transformers.AutoTokenizer.from_pretrained(checkpoint); they are copied into every checkpoint.
#include <cstdint>
#include <string>
#include <vector>

namespace sg::data {

inline constexpr const char* kTokenizerJson = "tokenizer.json";
inline constexpr const char* kTokenizerConfigJson = "tokenizer_config.json";
inline constexpr const char* kSpecialTokensMapJson = "special_tokens_map.json";

struct HfTokenizerInfo {
  std::string dir;
  int64_t vocab_size = 0;       // largest token id + 1 (model vocabulary and added tokens)
  int64_t model_tokens = 0;     // entries of model.vocab
  int64_t added_tokens = 0;     // entries of added_tokens
  std::string model_type;       // model.type: "BPE", "Unigram", "WordPiece", ...
  std::string eos_token;        // "" when the folder names none
  int32_t eod_id = -1;          // id of eos_token; -1 when there is none
  std::vector<std::string> files;  // the files above that exist, as full paths, for the checkpoint copy

  // "data/tok: BPE, 2000 tokens (1999 + 1 added), EOD <|endoftext|> = 0"
  std::string describe() const;
};

// Reads DIR/tokenizer.json (required), DIR/tokenizer_config.json and DIR/special_tokens_map.json
// (optional). sg::Error naming the file and the fix when DIR or tokenizer.json is missing, a file is
// not JSON of the expected shape, or the named eos_token is not in the vocabulary.
HfTokenizerInfo read_hf_tokenizer(const std::string& dir);

}  // namespace sg::data

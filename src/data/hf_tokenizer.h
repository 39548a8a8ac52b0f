#pragma once
// What training needs from a Hugging Face tokenizer folder (tokenizer.tokenizer_model), read from its
// JSON files with nlohmann-json — stepgraph never tokenizes text itself (tools/*.py do, with the
// `tokenizers` library):
//   tokenizer.json           model.vocab (a {token: id} map, or Unigram's [[token, score], ...] list)
//                            and added_tokens [{"id", "content"}]: the vocabulary is every id + 1
//   tokenizer_config.json    eos_token (a string or {"content": ...}): the end-of-document (EOD) token;
//                            bos_token: the beginning-of-sequence token (transformers' tokenizer.bos_token)
//   special_tokens_map.json  eos_token and bos_token, each when tokenizer_config.json has none
// A post-processor's leading special token is not taken for a BOS: BERT's [CLS] is one, and is no BOS.
// Every checkpoint gets a byte-for-byte copy of the folder's files that transformers.AutoTokenizer (and
// AutoProcessor) read, so AutoTokenizer.from_pretrained(checkpoint) loads the same tokenizer next to
// AutoModelForCausalLM: kTokenizerFiles, and the extra chat templates additional_chat_templates/NAME.jinja.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace sg::data {

inline constexpr const char* kTokenizerJson = "tokenizer.json";
inline constexpr const char* kTokenizerConfigJson = "tokenizer_config.json";
inline constexpr const char* kSpecialTokensMapJson = "special_tokens_map.json";

// The file names transformers' tokenization_utils_base loads from a tokenizer folder, those of the common slow
// tokenizers' vocabularies (their classes' vocab_files_names) and the processor's legacy chat template. Since
// transformers 4.47 save_pretrained writes the chat template as chat_template.jinja, not in tokenizer_config.json.
inline constexpr std::array<const char*, 12> kTokenizerFiles = {
    kTokenizerJson,
    kTokenizerConfigJson,
    kSpecialTokensMapJson,
    "chat_template.jinja",
    "chat_template.json",       // AutoProcessor's, and older transformers'
    "added_tokens.json",        // slow tokenizers' added tokens (legacy)
    "tokenizer.model",          // SentencePiece: Llama 2, Mistral, Gemma
    "vocab.json",               // byte-level BPE: GPT-2, Qwen2, RoBERTa
    "merges.txt",               // (with vocab.json)
    "vocab.txt",                // WordPiece: BERT
    "spiece.model",             // SentencePiece: T5, ALBERT
    "sentencepiece.bpe.model",  // SentencePiece: XLM-R, mBART
};
// Extra chat templates, additional_chat_templates/NAME.jinja (transformers loads each as template NAME).
// Every entry must be a regular NAME.jinja file: transformers would skip anything else without a word, so a
// template saved under another name, or in a subfolder, would silently be missing from the checkpoints.
inline constexpr const char* kAdditionalChatTemplatesDir = "additional_chat_templates";
inline constexpr const char* kChatTemplateExtension = ".jinja";

struct HfTokenizerInfo {
  std::string dir;
  int64_t vocab_size = 0;       // largest token id + 1 (model vocabulary and added tokens)
  int64_t model_tokens = 0;     // entries of model.vocab
  int64_t added_tokens = 0;     // entries of added_tokens
  std::string model_type;       // model.type: "BPE", "Unigram", "WordPiece", ...
  std::string eos_token;        // "" when the folder names none
  int32_t eod_id = -1;          // id of eos_token; -1 when there is none
  std::string bos_token;        // "" when the folder names none
  int32_t bos_id = -1;          // id of bos_token; -1 when there is none
  // What checkpoints copy, as paths relative to `dir`: the kTokenizerFiles that exist, then
  // additional_chat_templates/NAME.jinja by name.
  std::vector<std::string> files;

  // "data/tok: BPE, 2000 tokens (1999 in the model vocabulary, 1 added), EOD <|endoftext|> = 0, BOS <s> = 1"
  std::string describe() const;
};

// Reads DIR/tokenizer.json (required), DIR/tokenizer_config.json and DIR/special_tokens_map.json
// (optional), and lists the files checkpoints copy. sg::Error naming the file and the fix when DIR or
// tokenizer.json is missing, a file is not JSON of the expected shape, the named eos_token or bos_token is not
// in the vocabulary, or DIR/additional_chat_templates is not a folder or holds anything but regular NAME.jinja
// files.
HfTokenizerInfo read_hf_tokenizer(const std::string& dir);

}  // namespace sg::data

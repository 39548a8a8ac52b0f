#pragma once
// The checkpoint's tokenizer for `stepgraph generate`: tools/tokenizer_server.py (Hugging Face
// `tokenizers`, the package the data tools use) run as a child process, spoken to in JSON lines. C++
// has no build of that Rust library here; running the same Python package keeps encode/decode
// identical to what the training data was prepared with.
#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace sg::generate {

// tools/tokenizer_server.py: $STEPGRAPH_TOOLS/tokenizer_server.py when set, else next to the binary in
// a checkout (build/src/stepgraph -> tools/), else the source tree the binary was built from.
// sg::Error naming the places searched when none exists.
std::string find_tokenizer_server();

// The tokenizer folder for a model folder: `explicit_dir` when given, else the first of model_folder
// and its parent (a checkpoint root) holding tokenizer.json. sg::Error naming both when none.
std::string find_tokenizer_dir(const std::string& explicit_dir, const std::string& model_folder);

class TokenizerProcess {
 public:
  // Starts `python3 tools/tokenizer_server.py DIR` ($STEPGRAPH_PYTHON overrides python3) and reads its
  // ready line. sg::Error with the server's message (missing `tokenizers` package, no tokenizer.json,
  // ...) or with why python3 could not run.
  explicit TokenizerProcess(const std::string& tokenizer_dir);
  ~TokenizerProcess();
  TokenizerProcess(const TokenizerProcess&) = delete;
  TokenizerProcess& operator=(const TokenizerProcess&) = delete;

  std::vector<int32_t> encode(const std::string& text);
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = true);

  int64_t vocab_size() const { return vocab_size_; }
  std::optional<int32_t> eos_id() const { return eos_id_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string request(const std::string& json_line);  // one line out, one line back
  void read_ready_line(const std::string& tokenizer_dir);
  // One request, its answer checked: an "error" (raised, except for the ready line) or a reply holding
  // `expected` ("ready", "ids" or "text") with the right types; anything else is an error naming the line.
  nlohmann::json reply(const std::string& json_line, const char* expected);
  void stop() noexcept;  // closes our end (the server then exits) and reaps it

  std::string dir_;
  pid_t pid_ = -1;
  int socket_ = -1;  // our end of the socket pair (the child's stdin and stdout)
  std::string buffered_;
  int64_t vocab_size_ = 0;
  std::optional<int32_t> eos_id_;
};

}  // namespace sg::generate

#include "generate/tokenizer_process.h"

#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/strings.h"
#include "data/hf_tokenizer.h"

extern char** environ;

namespace sg::generate {

namespace fs = std::filesystem;

namespace {

constexpr const char* kServer = "tokenizer_server.py";

std::string executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

// send() with MSG_NOSIGNAL: a server that died gives an error here, not a SIGPIPE for the whole CLI.
void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(std::string("tokenizer process: cannot write to it: ") + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::string find_tokenizer_server() {
  std::vector<std::string> candidates;
  if (const char* dir = std::getenv("STEPGRAPH_TOOLS")) candidates.push_back(std::string(dir) + "/" + kServer);
  const std::string exe = executable_dir();
  if (!exe.empty()) {
    for (const char* up : {"/../../tools/", "/../tools/", "/tools/"}) candidates.push_back(exe + up + kServer);
  }
#ifdef STEPGRAPH_SOURCE_DIR
  candidates.push_back(std::string(STEPGRAPH_SOURCE_DIR) + "/tools/" + kServer);
#endif
  std::error_code ec;
  for (const auto& c : candidates) {
    if (fs::is_regular_file(c, ec)) return fs::weakly_canonical(c, ec).string();
  }
  throw Error(
      strprintf("cannot find tools/%s (looked at: %s); set STEPGRAPH_TOOLS to the tools/ folder of the "
                "stepgraph checkout",
                kServer, join(candidates, ", ").c_str()));
}

std::string find_tokenizer_dir(const std::string& explicit_dir, const std::string& model_folder) {
  std::error_code ec;
  if (!explicit_dir.empty()) {
    if (!fs::is_regular_file(fs::path(explicit_dir) / data::kTokenizerJson, ec)) {
      throw Error(
          strprintf("--tokenizer %s: %s; give a folder with a %s (one written by tools/train_tokenizer.py, "
                    "or a Hugging Face model's folder with a fast tokenizer)",
                    explicit_dir.c_str(),
                    fs::is_directory(explicit_dir, ec) ? strprintf("no %s there", data::kTokenizerJson).c_str()
                                                       : "no such folder",
                    data::kTokenizerJson));
    }
    return explicit_dir;
  }
  // Absolute, so a relative folder's parent is named (the parent of "hf" is "", of "/runs/hf" "/runs").
  const fs::path folder = fs::absolute(model_folder, ec).lexically_normal();
  for (const fs::path& dir : {folder, folder.parent_path()}) {
    if (!dir.empty() && fs::is_regular_file(dir / data::kTokenizerJson, ec)) return dir.string();
  }
  throw Error(
      strprintf("no tokenizer.json in %s or %s: pass --tokenizer DIR (a folder written by "
                "tools/train_tokenizer.py, or the Hugging Face model's folder), or give token ids with "
                "--prompt-tokens",
                folder.string().c_str(), folder.parent_path().string().c_str()));
}

TokenizerProcess::TokenizerProcess(const std::string& tokenizer_dir) : dir_(tokenizer_dir) {
  const std::string server = find_tokenizer_server();
  const char* python_env = std::getenv("STEPGRAPH_PYTHON");
  const std::string python = python_env != nullptr ? python_env : "python3";
  // One socket pair: the child's end is its stdin and stdout.
  int ends[2];
  SG_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) == 0,
           std::string("tokenizer process: socketpair: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, ends[1], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, ends[1], STDOUT_FILENO);
  // Its own process group: a Ctrl-C at the terminal reaches only generate, which stops decoding and still needs
  // the tokenizer for the text so far. The server exits when its input closes, so it never outlives us.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  std::vector<std::string> args = {python, "-u", server, tokenizer_dir};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = posix_spawnp(&pid_, python.c_str(), &actions, &attributes, argv.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  ::close(ends[1]);
  socket_ = ends[0];
  if (rc != 0) {
    pid_ = -1;
    stop();
    throw Error(
        strprintf("cannot run %s for the tokenizer (%s): install Python 3 with `tokenizers` "
                  "(bash scripts/setup.sh), or set STEPGRAPH_PYTHON",
                  python.c_str(), std::strerror(rc)));
  }
  try {
    read_ready_line(tokenizer_dir);
  } catch (...) {
    stop();  // the destructor does not run for a constructor that throws
    throw;
  }
}

void TokenizerProcess::read_ready_line(const std::string& tokenizer_dir) {
  const nlohmann::json ready = reply("", "ready");
  if (ready.contains("error")) {
    throw Error(strprintf("tokenizer %s: %s", tokenizer_dir.c_str(), ready["error"].get<std::string>().c_str()));
  }
  vocab_size_ = ready["vocab_size"].get<int64_t>();
  if (ready.contains("eos_id") && !ready["eos_id"].is_null()) eos_id_ = ready["eos_id"].get<int32_t>();
}

TokenizerProcess::~TokenizerProcess() { stop(); }

void TokenizerProcess::stop() noexcept {
  if (socket_ >= 0) ::close(socket_);  // end of input: the server exits
  socket_ = -1;
  if (pid_ > 0) {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

std::string TokenizerProcess::request(const std::string& json_line) {
  if (!json_line.empty()) write_all(socket_, json_line + "\n");
  while (true) {
    const size_t newline = buffered_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffered_.substr(0, newline);
      buffered_.erase(0, newline + 1);
      return line;
    }
    char chunk[65536];
    const ssize_t n = ::read(socket_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw Error(strprintf("the tokenizer process (tools/%s %s) ended unexpectedly; run it by hand to see why",
                            kServer, dir_.c_str()));
    }
    buffered_.append(chunk, static_cast<size_t>(n));
  }
}

std::vector<int32_t> TokenizerProcess::encode(const std::string& text) {
  const nlohmann::json answer =
      reply(nlohmann::json{{"encode", text}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "ids");
  return answer["ids"].get<std::vector<int32_t>>();
}

std::string TokenizerProcess::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) {
  return reply(nlohmann::json{{skip_special_tokens ? "decode" : "decode_raw", ids}}.dump(), "text")["text"]
      .get<std::string>();
}

namespace {

// (nlohmann stores a non-negative integer as unsigned: 2^64 - 1 read as int64 would be -1.)
bool is_int32(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= INT32_MAX;
  return v.is_number_integer() && v.get<int64_t>() >= INT32_MIN && v.get<int64_t>() <= INT32_MAX;
}

// Whether `answer` is the reply tools/tokenizer_server.py's docstring defines for `expected`.
bool is_reply(const nlohmann::json& answer, const std::string& expected) {
  if (!answer.is_object()) return false;
  if (answer.contains("error")) return answer["error"].is_string();
  if (!answer.contains(expected)) return false;
  const nlohmann::json& value = answer[expected];
  if (expected == "ready") {
    const bool eos_ok = !answer.contains("eos_id") || answer["eos_id"].is_null() ||
                        (is_int32(answer["eos_id"]) && answer["eos_id"].get<int64_t>() >= 0);
    return value.is_boolean() && answer.contains("vocab_size") && is_int32(answer["vocab_size"]) &&
           answer["vocab_size"].get<int64_t>() > 0 && eos_ok;
  }
  if (expected == "ids") return value.is_array() && std::all_of(value.begin(), value.end(), is_int32);
  return value.is_string();  // "text"
}

}  // namespace

// Anything but a reply (a foreign print on the server's stdout, a damaged install) is named with its line, not
// left to escape as a JSON exception.
nlohmann::json TokenizerProcess::reply(const std::string& json_line, const char* expected) {
  const std::string line = request(json_line);
  nlohmann::json answer;
  try {
    answer = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception&) {  // parse_error; out_of_range for a number past double
    answer = nullptr;
  }
  if (!is_reply(answer, expected)) {
    throw Error(
        strprintf("the tokenizer process (tools/%s %s) answered \"%s\" where a reply with \"%s\" was "
                  "expected; run it by hand to see why, or reinstall with bash scripts/setup.sh",
                  kServer, dir_.c_str(), line.c_str(), expected));
  }
  if (answer.contains("error") && std::string(expected) != "ready") {
    throw Error("tokenizer: " + answer["error"].get<std::string>());
  }
  return answer;
}

}  // namespace sg::generate

#pragma once
// The fixture of the `stepgraph train` CLI tests (tests/train/trainer_*cli_test.cpp): the real binary
// run as a child process on the CPU fp32 reference backend, one synthetic corpus per suite, one
// scratch folder per test (kept when the test fails), readers for metrics.jsonl, and the process helpers
// of the tests that stop a run or limit its files.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "process_util.h"
#include "sanitizer_build.h"
#include "test_dir.h"

namespace sg::test::train_cli {

namespace fs = std::filesystem;
using sg::checkpoint::SafetensorsFile;
using sg::checkpoint::TensorDtype;

// ---- processes ----

struct RunResult {
  int rc = -1;          // exit status, or -1 when killed by a signal / timed out
  bool timed_out = false;
  double seconds = 0.0;
  std::string out, err;
  long max_rss_kb = 0;  // the child's peak resident memory (getrusage's ru_maxrss), when it was waited for
  std::string all() const { return "--- stdout:\n" + out + "--- stderr:\n" + err; }
};

using sg::test::read_file;

struct Child {
  pid_t pid = -1;
  fs::path out_path, err_path;
  std::chrono::steady_clock::time_point start;
};

// Starts the stepgraph binary with args... with stdout/stderr going to LOG.out / LOG.err. The child starts with
// SIGINT and SIGHUP at their defaults whatever the test process inherited (a background job ignores SIGINT, nohup
// SIGHUP), or with SIGHUP ignored as nohup starts a command (`sighup_ignored`).
inline Child spawn(const std::vector<std::string>& args, const fs::path& log, bool sighup_ignored = false) {
  Child c;
  c.out_path = log.string() + ".out";
  c.err_path = log.string() + ".err";
  c.start = std::chrono::steady_clock::now();
  StepgraphArgv argv(args);
  c.pid = ::fork();
  if (c.pid == 0) {
    const int out = ::open(c.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(c.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0) ::_exit(126);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGHUP, sighup_ignored ? SIG_IGN : SIG_DFL);
    argv.exec();
  }
  return c;
}

// Waits up to timeout_s for the child; kills it (SIGKILL) when it takes longer.
inline RunResult wait_for(const Child& c, double timeout_s) {
  RunResult r;
  if (c.pid < 0) return r;
  int status = 0;
  for (;;) {
    struct rusage usage {};
    const pid_t done = ::wait4(c.pid, &status, WNOHANG, &usage);
    if (done == c.pid) {
      r.max_rss_kb = usage.ru_maxrss;
      break;
    }
    if (done < 0) {  // not our child (any more): nothing to wait for
      r.out = read_file(c.out_path);
      r.err = read_file(c.err_path);
      return r;
    }
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count();
    if (elapsed > timeout_s) {
      ::kill(c.pid, SIGKILL);
      ::waitpid(c.pid, &status, 0);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count();
  r.rc = !r.timed_out && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(c.out_path);
  r.err = read_file(c.err_path);
  return r;
}

// SIGKILLs and reaps the child on scope exit: a failed assertion must not leave a long training running.
// release() once the child is reaped, as its pid may name another process by then.
struct KillOnExit {
  explicit KillOnExit(pid_t child) : pid(child) {}
  KillOnExit(const KillOnExit&) = delete;
  KillOnExit& operator=(const KillOnExit&) = delete;
  ~KillOnExit() {
    if (pid > 0 && ::kill(pid, SIGKILL) == 0) ::waitpid(pid, nullptr, 0);
  }
  void release() { pid = -1; }
  pid_t pid;
};

struct PipeOptions {
  // Every file the child writes is limited to this many bytes (RLIMIT_FSIZE; 0: no limit), with SIGXFSZ
  // ignored, so a write past it fails with EFBIG as on a full disk. The pipe is not a file: not limited.
  rlim_t file_size_limit = 0;
};

// False in a ThreadSanitizer build (scripts/sanitize_cpu.sh thread): its runtime writes 512 KiB of shadow to
// /tmp/tsan.rodata.<pid> and maps it before main, so under a smaller file_size_limit the binary dies of SIGBUS
// at start. The tests of a full disk skip there.
inline constexpr bool kSmallFileSizeLimitWorks = !test::kThreadSanitizer;

struct PipedChild {
  pid_t pid = -1;     // -1: the pipe or the fork failed
  int read_end = -1;  // the caller's to read and close
};

// Starts the stepgraph binary with args... with stdout and stderr into one pipe, as `2>&1 | tee` does, and
// SIGPIPE and SIGINT at their default actions, as a shell starts a pipeline.
inline PipedChild spawn_into_pipe(const std::vector<std::string>& args, PipeOptions options = {}) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  StepgraphArgv argv(args);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    if (options.file_size_limit > 0) {
      ::signal(SIGXFSZ, SIG_IGN);
      const rlimit limit{options.file_size_limit, options.file_size_limit};
      ::setrlimit(RLIMIT_FSIZE, &limit);
    }
    argv.exec();
  }
  ::close(fds[1]);
  if (pid < 0) {
    const int fork_error = errno;  // for the caller's message, past close()
    ::close(fds[0]);
    errno = fork_error;
    return {};
  }
  return {.pid = pid, .read_end = fds[0]};
}

// Runs stepgraph as spawn_into_pipe does, to its end: both streams, in the order written, come back in `err`
// (stepgraph's messages go to stderr); `out` stays empty.
inline RunResult run_into_pipe(const std::vector<std::string>& args, PipeOptions options = {}) {
  RunResult r;
  const auto start = std::chrono::steady_clock::now();
  const PipedChild child = spawn_into_pipe(args, options);
  if (child.pid < 0) {
    r.err = "could not start " + sg::test::stepgraph_binary() + ": " + std::strerror(errno);
    return r;
  }
  char buffer[4096];
  for (ssize_t n; (n = ::read(child.read_end, buffer, sizeof(buffer))) > 0;) {
    r.err.append(buffer, static_cast<size_t>(n));
  }
  ::close(child.read_end);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// ---- metrics.jsonl ----

struct MetricsLine {
  int64_t step = -1;
  std::string loss_text;  // exactly as printed (%.9g): equal text <=> equal float
  double loss = NAN;
  std::string raw;
};

inline std::vector<MetricsLine> read_metrics(const fs::path& path) {
  std::vector<MetricsLine> out;
  std::ifstream in(path);
  std::string line;
  static const std::regex step_re(R"("step":\s*(-?[0-9]+))");
  static const std::regex loss_re(R"("loss":\s*([^,}\s]+))");
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    MetricsLine m;
    m.raw = line;
    std::smatch match;
    if (std::regex_search(line, match, step_re)) m.step = std::stoll(match[1]);
    if (std::regex_search(line, match, loss_re)) {
      m.loss_text = match[1];
      m.loss = std::strtod(m.loss_text.c_str(), nullptr);
    }
    out.push_back(std::move(m));
  }
  return out;
}

inline size_t count_lines(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) n += line.empty() ? 0 : 1;
  return n;
}

struct MetricsWait {
  bool ended = false;  // the child ended first: reaped, and its guard released
  int status = 0;      // its wait status when it ended
};

// Waits until done() holds, the child ends, or `timeout` passes, whichever comes first; the caller asserts on what
// it needs.
inline MetricsWait wait_until(KillOnExit& child, const std::function<bool()>& done, std::chrono::seconds timeout) {
  MetricsWait w;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(child.pid, &w.status, WNOHANG) != 0) {
      w.ended = true;
      child.release();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return w;
}

// Waits until `metrics` has `lines` lines (see wait_until; the count is not checked here).
inline MetricsWait wait_for_metrics_lines(KillOnExit& child, const fs::path& metrics, size_t lines,
                                          std::chrono::seconds timeout) {
  return wait_until(child, [&] { return count_lines(metrics) >= lines; }, timeout);
}

// Waits until the file (a child's stderr) holds `text` (see wait_until).
inline MetricsWait wait_for_text(KillOnExit& child, const fs::path& file, const std::string& text,
                                 std::chrono::seconds timeout) {
  return wait_until(child, [&] { return read_file(file).find(text) != std::string::npos; }, timeout);
}

inline std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// ---- the fixture: one synthetic corpus for the suite, one scratch folder per test ----

inline constexpr double kRunTimeout = 300.0;  // seconds per training run (the CI machine may be loaded)

class TrainerCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    suite_dir_ = make_temp_dir("trainer_cli_corpus");
    corpus_ = (suite_dir_ / "corpus").string();
    const Child c = spawn({"data", "synth", "--out", corpus_, "--tokens", "200000", "--seed", "11", "--json"},
                          suite_dir_ / "synth");
    const RunResult r = wait_for(c, kRunTimeout);
    synth_output_ = r.all();
    if (r.rc != 0) return;
    try {
      unigram_entropy_ = nlohmann::json::parse(r.out).at("unigram_entropy_nats").get<double>();
    } catch (const std::exception& e) {
      synth_output_ += std::string("\nparse error: ") + e.what();
    }
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(suite_dir_, ec);
  }

  void SetUp() override {
    ASSERT_TRUE(std::isfinite(unigram_entropy_)) << "stepgraph data synth failed:\n" << synth_output_;
    dir_ = make_temp_dir("trainer_cli_test");
  }
  void TearDown() override {
    if (HasFailure()) {
      std::fprintf(stderr, "kept the failed test's files in %s\n", dir_.c_str());
    } else {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }

  // Scratch folders live under the working directory (ctest runs in the build directory).
  static fs::path make_temp_dir(const std::string& tag) {
    std::string tmpl = (fs::current_path() / (tag + ".XXXXXX")).string();
    const char* made = ::mkdtemp(tmpl.data());
    if (made == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
    return fs::path(made);
  }

  // A model the CPU trains in well under a second per step, on the synthetic corpus.
  static std::vector<std::string> tiny_model(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {
        "train", "llama/tiny", "--plain", "model.num_layers=2", "model.hidden_size=64",
        "model.num_attention_heads=4", "model.num_query_groups=4", "model.ffn_hidden_size=128",
        "model.seq_length=32", "dataset.seq_length=32", "model.vocab_size=256",
        "train.micro_batch_size=2", "train.global_batch_size=4", "optimizer.lr=3e-3",
        // lr_warmup_iters must stay below lr_decay_iters (= train_iters unless set): the recipe's 5
        // would refuse the runs of 2-4 steps here.
        "scheduler.lr_warmup_iters=1",
        "dataset.mock=false", "dataset.data_path=[" + corpus_ + "]"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  RunResult train(std::vector<std::string> extra, const std::string& name, bool force_cpu = true) {
    std::vector<std::string> args = tiny_model(std::move(extra));
    if (force_cpu) args.push_back("--cpu");
    return wait_for(spawn(args, dir_ / name), kRunTimeout);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static inline fs::path suite_dir_;
  static inline std::string corpus_;
  static inline double unigram_entropy_ = NAN;
  static inline std::string synth_output_;
  fs::path dir_;
};

}  // namespace sg::test::train_cli

#pragma once
// Shared by the libFuzzer harnesses of the file and string parsers (tests/fuzz/*_fuzz.cpp, built and run by
// scripts/fuzz_cpu.sh): a scratch folder on a tmpfs for the APIs that take a path, and the rule every harness
// applies, that a parser rejects bad bytes with an sg::Error and nothing else.
//
// A harness's LLVMFuzzerTestOneInput wraps its calls in expect_sg_errors: an sg::Error (ConfigError and
// CorruptTrainState are ones) is the expected answer to malformed input; any other exception escaping is
// reported and aborts, so libFuzzer keeps the input as a crash. ASan/UBSan, -rss_limit_mb and -timeout catch the
// rest (memory errors, undefined behaviour, unbounded allocations, hangs).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <typeinfo>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/log.h"

namespace sg::fuzz {

// <base>/sg_fuzz_<name>_<pid>, made once per process, emptied by clear() and removed when the process exits (not
// when it aborts at a finding). The base is $SG_FUZZ_TMP, else /dev/shm (a tmpfs: a file write costs no disk), else
// the system's temporary folder.
struct ScratchDir {
  std::filesystem::path path;
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};
inline const std::filesystem::path& scratch_dir(const std::string& name) {
  static const ScratchDir dir{[&] {
    std::filesystem::path base;
    if (const char* env = std::getenv("SG_FUZZ_TMP"); env != nullptr && *env != '\0') {
      base = env;
    } else if (std::filesystem::is_directory("/dev/shm")) {
      base = "/dev/shm";
    } else {
      base = std::filesystem::temp_directory_path();
    }
    const std::filesystem::path d = base / ("sg_fuzz_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    // The messages of expected errors and warnings would flood the fuzzer's output.
    log::set_level(log::Level::error);
    return d;
  }()};
  return dir.path;
}

// Empties `dir` (keeps the folder).
inline void clear(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) std::filesystem::remove_all(entry.path(), ec);
}

inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "fuzz harness: cannot write %s\n", path.c_str());
    std::abort();
  }
}

// The input cut into `n` parts at the separator line "\n=====\n" (what the seed scripts write between the files
// of one input); parts past the last separator are empty.
inline std::vector<std::string> split_parts(const uint8_t* data, size_t size, size_t n) {
  static constexpr std::string_view kSeparator = "\n=====\n";
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t begin = 0;
  while (parts.size() + 1 < n) {
    const size_t at = text.find(kSeparator, begin);
    if (at == std::string_view::npos) break;
    parts.emplace_back(text.substr(begin, at - begin));
    begin = at + kSeparator.size();
  }
  parts.emplace_back(text.substr(std::min(begin, text.size())));
  parts.resize(n);
  return parts;
}

// Runs fn; an sg::Error is the parser's expected answer, anything else escaping is a finding.
template <class Fn>
void expect_sg_errors(const char* harness, Fn&& fn) {
  try {
    std::forward<Fn>(fn)();
  } catch (const Error&) {
    // malformed input, refused with a message: expected
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: a non-sg exception escaped (%s): %s\n", harness, typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "%s: a non-std exception escaped\n", harness);
    std::abort();
  }
}

}  // namespace sg::fuzz

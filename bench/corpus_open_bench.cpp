// Opening a Megatron indexed corpus (data/indexed_dataset.h): IndexedDataset::open validates the .idx and scans
// every token of the .bin against the vocabulary. Writes a synthetic corpus of --gb gigabytes under --dir (random
// documents of 1 to 4096 tokens, ids below --vocab, in --dtype), reads it once to warm the page cache, then times
// --runs opens and prints each, the median and the median's GB/s. CPU only; the files stay for --reuse.
// How the page cache came to hold the .bin matters: on this kernel (6.18) pages the writer left, or that two threads
// faulted in at once, map slower than the larger folios one sequential reader leaves (2 GB of uint16 on 2 cores:
// 7.6 against 23 GB/s), so --evict drops the .bin from the cache and reads it back with read() first.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_args.h"
#include "data/indexed_dataset.h"

namespace {

using sg::data::IndexedDataset;
using sg::data::TokenDtype;

void write_corpus(const std::string& prefix, TokenDtype dtype, double gb, long long vocab) {
  const auto target_tokens = static_cast<uint64_t>(gb * 1e9 / static_cast<double>(sg::data::token_dtype_size(dtype)));
  sg::data::IndexedDatasetWriter writer(prefix, dtype);
  std::mt19937_64 rng(7);
  std::vector<int32_t> doc;
  while (writer.num_tokens() < target_tokens) {
    doc.resize(1 + rng() % 4096);
    for (int32_t& t : doc) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    writer.add_document(doc);
  }
  writer.finalize();
}

void evict_and_read_back(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  bool ok = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  std::vector<char> buffer(size_t{1} << 20);
  ssize_t n = 0;
  while (ok && (n = ::read(fd, buffer.data(), buffer.size())) > 0) {
  }
  ::close(fd);
  if (!ok || n < 0) throw std::runtime_error("cannot evict and read back " + path);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const sg::bench::ToolArgs args = sg::bench::read_tool_args(
      argc, argv,
      {.program = "corpus_open_bench",
       .about =
           "Writes a synthetic indexed corpus of --gb GB of --dtype tokens under --dir (unless --reuse), warms the\n"
           "page cache with one open, then times --runs IndexedDataset::open calls (validation and the scan of\n"
           "every token against --vocab) and prints the median and its GB/s. CPU only.",
       .flags = {{.name = "--gb",
                  .value = sg::bench::ToolValue::number,
                  .default_value = "2",
                  .min = 0.001,
                  .max = 1e4,
                  .help = "size of the .bin in GB (10^9 bytes)"},
                 {.name = "--dtype",
                  .value = sg::bench::ToolValue::text,
                  .default_value = "uint16",
                  .choices = {"uint16", "int32"},
                  .help = "token dtype of the corpus"},
                 {.name = "--vocab",
                  .default_value = "50000",
                  .min = 1,
                  .max = 2147483647,
                  .help = "token ids are below this, and open() checks against it"},
                 {.name = "--runs", .default_value = "5", .min = 1, .max = 1000, .help = "timed opens"},
                 {.name = "--dir",
                  .value = sg::bench::ToolValue::text,
                  .default_value = "/tmp/corpus_open_bench",
                  .help = "where the corpus is written (PREFIX corpus_<dtype>)"},
                 {.name = "--evict",
                  .value = sg::bench::ToolValue::none,
                  .help = "drop the .bin from the page cache, then read it back with read() before the opens"},
                 {.name = "--reuse",
                  .value = sg::bench::ToolValue::none,
                  .help = "open an existing --dir/corpus_<dtype> instead of writing one"}}});
  try {
    const TokenDtype dtype = args.text("--dtype") == "int32" ? TokenDtype::int32 : TokenDtype::uint16;
    const long long vocab = args.integer("--vocab");
    if (dtype == TokenDtype::uint16 && vocab > 65536)
      throw std::runtime_error("--vocab above 65536 needs --dtype int32");
    std::filesystem::create_directories(args.text("--dir"));
    const std::string prefix =
        (std::filesystem::path(args.text("--dir")) / ("corpus_" + args.text("--dtype"))).string();
    if (!args.on("--reuse")) {
      const auto start = std::chrono::steady_clock::now();
      write_corpus(prefix, dtype, args.number("--gb"), vocab);
      std::printf("wrote %s.{bin,idx} in %.1f s\n", prefix.c_str(), seconds_since(start));
    }
    const double bytes = static_cast<double>(std::filesystem::file_size(sg::data::bin_path(prefix)));
    if (args.on("--evict")) evict_and_read_back(sg::data::bin_path(prefix));
    (void)IndexedDataset::open(prefix, vocab);  // warms the page cache
    std::vector<double> times;
    for (long long r = 0; r < args.integer("--runs"); ++r) {
      const auto start = std::chrono::steady_clock::now();
      const IndexedDataset ds = IndexedDataset::open(prefix, vocab);
      times.push_back(seconds_since(start));
      std::printf("open %lld: %.3f s (%llu sequences, %llu tokens, ids %lld to %lld)\n", r, times.back(),
                  static_cast<unsigned long long>(ds.num_sequences()), static_cast<unsigned long long>(ds.num_tokens()),
                  static_cast<long long>(ds.min_token()), static_cast<long long>(ds.max_token()));
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    std::printf("%s: %.2f GB of %s, %u hardware threads: median open %.3f s, %.2f GB/s\n", prefix.c_str(), bytes / 1e9,
                args.text("--dtype").c_str(), std::thread::hardware_concurrency(), median, bytes / 1e9 / median);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corpus_open_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}

#include "data/token_scan.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <system_error>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"

namespace sg::data {

namespace {

struct Bounds {
  int64_t lo = std::numeric_limits<int64_t>::max();  // lo > hi: no tokens
  int64_t hi = std::numeric_limits<int64_t>::min();
};

Bounds merge(Bounds a, Bounds b) {
  return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)};
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // compiles to a plain load; no alignment or aliasing assumption on the mapping
  return v;
}

// Min and max of n tokens. 64 bytes of independent lanes a step: a fixed-trip inner loop that g++ vectorizes at -O2
// as well as -O3 (the plain one-accumulator loop only at -O3), and that keeps several vectors in flight.
template <typename T>
Bounds bounds_of(const uint8_t* p, uint64_t n) {
  constexpr int kLanes = 64 / sizeof(T);
  T lo[kLanes], hi[kLanes];
  for (int j = 0; j < kLanes; ++j) {
    lo[j] = std::numeric_limits<T>::max();
    hi[j] = std::numeric_limits<T>::lowest();
  }
  uint64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const T v = load<T>(p + (i + j) * sizeof(T));
      lo[j] = v < lo[j] ? v : lo[j];
      hi[j] = v > hi[j] ? v : hi[j];
    }
  }
  for (; i < n; ++i) {
    const T v = load<T>(p + i * sizeof(T));
    lo[0] = v < lo[0] ? v : lo[0];
    hi[0] = v > hi[0] ? v : hi[0];
  }
  Bounds b;
  if (n == 0) return b;
  for (int j = 0; j < kLanes; ++j) b = merge(b, {static_cast<int64_t>(lo[j]), static_cast<int64_t>(hi[j])});
  return b;
}

// Index of the first of n tokens outside [lo, hi], or n.
template <typename T>
uint64_t first_outside(const uint8_t* p, uint64_t n, int64_t lo, int64_t hi) {
  for (uint64_t i = 0; i < n; ++i) {
    const int64_t v = load<T>(p + i * sizeof(T));
    if (v < lo || v > hi) return i;
  }
  return n;
}

template <typename T>
int64_t token_at(const uint8_t* p) {
  return load<T>(p);
}

struct Kernels {
  Bounds (*bounds)(const uint8_t*, uint64_t);
  uint64_t (*first_outside)(const uint8_t*, uint64_t, int64_t, int64_t);
  int64_t (*token)(const uint8_t*);
};

template <typename T>
constexpr Kernels kernels_for() {
  return {&bounds_of<T>, &first_outside<T>, &token_at<T>};
}

Kernels kernels(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::uint8: return kernels_for<uint8_t>();
    case TokenDtype::int8: return kernels_for<int8_t>();
    case TokenDtype::int16: return kernels_for<int16_t>();
    case TokenDtype::uint16: return kernels_for<uint16_t>();
    case TokenDtype::int32: return kernels_for<int32_t>();
    case TokenDtype::int64: return kernels_for<int64_t>();
    case TokenDtype::float32:
    case TokenDtype::float64: break;  // refused at open
  }
  throw Error(strprintf("scan_token_array: token dtype %s is not an integer dtype", token_dtype_name(dtype)));
}

// Progress lines of one scan, written by the calling thread between its chunks.
class ScanProgress {
 public:
  ScanProgress(const TokenScanOptions& options, uint64_t total_bytes)
      : options_(options),
        total_bytes_(total_bytes),
        start_(Clock::now()),
        next_(start_ + seconds(options.progress_after_s)) {}

  void update(uint64_t done_bytes) {
    const auto now = Clock::now();
    if (now < next_) return;
    next_ = now + seconds(options_.progress_every_s);
    emit(strprintf("scanning %s: %d%% of %s, %.1f GB/s", options_.label.c_str(),
                   static_cast<int>(100.0 * static_cast<double>(done_bytes) / static_cast<double>(total_bytes_)),
                   gigabytes(total_bytes_).c_str(), rate(done_bytes, now)));
  }

  // A closing line where progress lines were shown, so the last one is not left at 9x%.
  void finish(uint64_t done_bytes) {
    if (!shown_) return;
    const auto now = Clock::now();
    emit(strprintf("scanned %s: %s in %.0f s, %.1f GB/s", options_.label.c_str(), gigabytes(done_bytes).c_str(),
                   std::chrono::duration<double>(now - start_).count(), rate(done_bytes, now)));
  }

 private:
  using Clock = std::chrono::steady_clock;
  static Clock::duration seconds(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }
  static std::string gigabytes(uint64_t bytes) { return strprintf("%.1f GB", static_cast<double>(bytes) / 1e9); }
  double rate(uint64_t bytes, Clock::time_point now) const {
    const double s = std::chrono::duration<double>(now - start_).count();
    return s > 0 ? static_cast<double>(bytes) / 1e9 / s : 0.0;
  }
  void emit(const std::string& line) {
    shown_ = true;
    if (options_.progress) {
      options_.progress(line);
    } else {
      log::info(line);
    }
  }

  const TokenScanOptions& options_;
  uint64_t total_bytes_;
  Clock::time_point start_, next_;
  bool shown_ = false;
};

}  // namespace

uint64_t scan_chunk_tokens(TokenDtype dtype, const TokenScanOptions& options) {
  return options.chunk_tokens > 0 ? options.chunk_tokens : kScanChunkBytes / token_dtype_size(dtype);
}

unsigned scan_threads(uint64_t bytes, unsigned hardware) {
  const uint64_t by_size = std::max<uint64_t>(1, bytes / kScanBytesPerThread);
  return static_cast<unsigned>(std::min<uint64_t>({std::max(hardware, 1u), kScanMaxThreads, by_size}));
}

TokenScan scan_token_array(TokenDtype dtype, const uint8_t* data, uint64_t num_tokens, int64_t allowed_min,
                           int64_t allowed_max, const TokenScanOptions& options) {
  TokenScan result;
  if (num_tokens == 0) return result;
  const Kernels k = kernels(dtype);
  const uint64_t item = token_dtype_size(dtype);
  const uint64_t chunk = scan_chunk_tokens(dtype, options);
  const uint64_t num_chunks = (num_tokens + chunk - 1) / chunk;
  const unsigned threads = static_cast<unsigned>(std::min<uint64_t>(
      options.threads > 0 ? options.threads : scan_threads(num_tokens * item, std::thread::hardware_concurrency()),
      num_chunks));

  // Chunks are taken in index order, so once chunk c holds a bad id every chunk before it has been taken: the first
  // bad id of the array is in the lowest bad chunk, and chunks after it need not be read.
  constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();
  std::atomic<uint64_t> next_chunk{0}, first_bad_chunk{kNone}, bytes_done{0};
  std::vector<Bounds> found(threads);
  ScanProgress progress(options, num_tokens * item);
  const auto work = [&](unsigned t) {
    Bounds acc;
    for (uint64_t c = next_chunk.fetch_add(1, std::memory_order_relaxed); c < num_chunks;
         c = next_chunk.fetch_add(1, std::memory_order_relaxed)) {
      if (c > first_bad_chunk.load(std::memory_order_relaxed)) break;
      const uint64_t begin = c * chunk, n = std::min(chunk, num_tokens - begin);
      const Bounds b = k.bounds(data + begin * item, n);
      if (b.lo < allowed_min || b.hi > allowed_max) {
        uint64_t seen = first_bad_chunk.load(std::memory_order_relaxed);
        while (c < seen && !first_bad_chunk.compare_exchange_weak(seen, c, std::memory_order_relaxed)) {
        }
      }
      acc = merge(acc, b);
      const uint64_t done = bytes_done.fetch_add(n * item, std::memory_order_relaxed) + n * item;
      if (t == 0) progress.update(done);
    }
    found[t] = acc;
  };
  {
    std::vector<std::jthread> helpers;  // joined at the end of this block, also when work(0) throws
    for (unsigned t = 1; t < threads; ++t) {
      try {
        helpers.emplace_back(work, t);
      } catch (const std::system_error&) {
        break;  // no more threads: the ones running take the remaining chunks
      }
    }
    work(0);
  }
  progress.finish(bytes_done.load());

  Bounds all;
  for (const Bounds& b : found) all = merge(all, b);
  result.min_token = all.lo;
  result.max_token = all.hi;
  if (const uint64_t c = first_bad_chunk.load(); c != kNone) {
    const uint64_t begin = c * chunk, n = std::min(chunk, num_tokens - begin);
    const uint64_t i = begin + k.first_outside(data + begin * item, n, allowed_min, allowed_max);
    SG_CHECK(i < begin + n, "scan_token_array: a chunk out of range has no token out of range");
    result.first_bad = i;
    result.bad_token = k.token(data + i * item);
  }
  return result;
}

}  // namespace sg::data

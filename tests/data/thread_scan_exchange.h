#pragma once
// The exchange of a shared token scan (data/token_scan_share.h) between threads standing for data-parallel ranks, in
// memory: in each round every part passes its text, the last to arrive combines them, and every part returns that.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/token_scan_share.h"

namespace sg::test {

class ThreadScanExchange {
 public:
  explicit ThreadScanExchange(int parts) : texts_(static_cast<size_t>(parts)), calls_(static_cast<size_t>(parts), 0) {}

  data::ScanShare share(int part) {
    return {.part = part,
            .parts = static_cast<int>(texts_.size()),
            .exchange = [this, part](const std::string& mine, const data::ScanCombine& combine) {
              return exchange(part, mine, combine);
            }};
  }
  // Rounds part `part` took part in.
  int calls(int part) {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_[static_cast<size_t>(part)];
  }

 private:
  std::string exchange(int part, const std::string& mine, const data::ScanCombine& combine) {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t round = round_;
    texts_[static_cast<size_t>(part)] = mine;
    ++calls_[static_cast<size_t>(part)];
    if (++arrived_ == texts_.size()) {
      combined_ = combine(texts_);
      arrived_ = 0;
      ++round_;
      changed_.notify_all();
    } else {
      // The next round cannot end before this part arrives in it, so combined_ is still this round's when it wakes.
      changed_.wait(lock, [&] { return round_ != round; });
    }
    return combined_;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> texts_;
  std::vector<int> calls_;
  size_t arrived_ = 0;
  uint64_t round_ = 0;
  std::string combined_;
};

// Runs body(part) on one thread a part and returns what each returned.
template <typename T, typename Body>
std::vector<T> on_parts(int parts, const Body& body) {
  std::vector<T> out(static_cast<size_t>(parts));
  std::vector<std::jthread> threads;
  for (int p = 0; p < parts; ++p) threads.emplace_back([&, p] { out[static_cast<size_t>(p)] = body(p); });
  threads.clear();  // joins
  return out;
}

}  // namespace sg::test

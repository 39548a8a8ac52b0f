#pragma once
// An indexed dataset of random documents for tests that train or evaluate on real files (dataset.split's shares):
// `documents` documents of min_tokens to max_tokens tokens each, ids below `vocab`, from `seed`.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"

namespace sg::test {

struct RandomCorpus {
  int documents = 100;
  int min_tokens = 20, max_tokens = 80;
  int32_t vocab = 256;
  uint32_t seed = 1;
};

inline void write_random_corpus(const std::string& prefix, const RandomCorpus& c) {
  data::IndexedDatasetWriter w(prefix, data::TokenDtype::uint16);
  std::mt19937 rng(c.seed);
  for (int d = 0; d < c.documents; ++d) {
    std::vector<int32_t> doc(c.min_tokens + rng() % (c.max_tokens - c.min_tokens + 1));
    for (int32_t& t : doc) t = static_cast<int32_t>(rng() % c.vocab);
    w.add_document(doc);
  }
  w.finalize();
}

}  // namespace sg::test

// libFuzzer harness: a Megatron indexed dataset (data/indexed_dataset.h), PREFIX.idx and PREFIX.bin, opened as
// training opens it, then read through every accessor the samplers use. Input: the .idx's byte count L as 4
// little-endian bytes, L bytes of .idx, then the .bin (a shorter input: all of it .idx, an empty .bin).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "data/indexed_dataset.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sg::data;
  const auto& dir = sg::fuzz::scratch_dir("indexed_dataset");
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::string_view idx = bytes, bin;
  if (size >= 4) {
    uint32_t n = 0;
    std::memcpy(&n, data, 4);
    idx = bytes.substr(4, n);
    bin = bytes.substr(std::min<size_t>(size, 4 + size_t{n}));
  }
  const std::string prefix = (dir / "corpus").string();
  sg::fuzz::write_file(index_path(prefix), idx);
  sg::fuzz::write_file(bin_path(prefix), bin);
  // The vocabulary check as training runs it (a model's vocab_size), and without one (stepgraph data inspect).
  for (const int64_t vocab_size : {int64_t{0}, int64_t{1000}}) {
    sg::fuzz::expect_sg_errors("indexed_dataset_fuzz", [&] {
      const IndexedDataset ds = IndexedDataset::open(prefix, vocab_size);
      const uint64_t sequences = std::min<uint64_t>(ds.num_sequences(), 64);
      for (uint64_t s = 0; s < sequences; ++s) (void)ds.sequence(s);
      const uint64_t documents = std::min<uint64_t>(ds.num_documents(), 64);
      for (uint64_t d = 0; d <= documents; ++d) (void)ds.document_token_start(d);
      const uint64_t tokens = std::min<uint64_t>(ds.num_tokens(), 4096);
      std::vector<int32_t> out(tokens);
      if (tokens > 0) ds.read_tokens(0, tokens, out.data());
      if (ds.num_tokens() > 1) ds.read_tokens(ds.num_tokens() / 2, 1, out.data());
    });
  }
  return 0;
}

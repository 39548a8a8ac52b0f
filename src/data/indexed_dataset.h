#pragma once
// Megatron-LM indexed datasets: PREFIX.bin holds the tokens, PREFIX.idx describes them.
//
// .idx layout (version 1, little-endian), as megatron/core/datasets/indexed_dataset.py writes it:
//   9 bytes   magic "MMIDIDX\0\0"
//   uint64    version = 1
//   uint8     token dtype code (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32,
//             8 uint16)
//   uint64    sequence count S
//   uint64    document index count D (= number of documents + 1)
//   int32[S]  sequence lengths in tokens
//   int64[S]  byte offset of each sequence in .bin
//   int64[D]  document index: sequence indices of document boundaries, 0 first and S last
//   (multimodal files add int8[S] sequence modes after this; they are ignored here.)
// Everything is validated at open, so bad data is an sg::Error naming the file before any kernel
// runs; that includes that the sequences tile the .bin exactly (from byte 0 to its end, without
// gaps), as Megatron's writer lays them out. The arrays are read in place from the mapped .idx (28 bytes a
// sequence that a copy would hold in each process, twice where the validation split opens the dataset again:
// 56 GB a rank for a corpus of 10^9 documents), and a sequence's stream position is its byte offset over the
// token size (the tiling makes them one).
#include <bit>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/mapped_file.h"

namespace sg::data {

// The .bin and .idx hold little-endian values, read and written as this machine's own.
static_assert(std::endian::native == std::endian::little, "indexed datasets are little-endian");

enum class TokenDtype : uint8_t {
  uint8 = 1,
  int8 = 2,
  int16 = 3,
  int32 = 4,
  int64 = 5,
  float64 = 6,
  float32 = 7,
  uint16 = 8
};

inline constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kIndexVersion = 1;
inline constexpr size_t kIndexHeaderBytes = 9 + 8 + 1 + 8 + 8;  // 34

size_t token_dtype_size(TokenDtype dtype);
const char* token_dtype_name(TokenDtype dtype);
// Megatron's choice for a tokenizer: uint16 when the vocabulary is below 65500, else int32.
TokenDtype token_dtype_for_vocab(int64_t vocab_size);

std::string index_path(const std::string& prefix);  // PREFIX.idx
std::string bin_path(const std::string& prefix);    // PREFIX.bin

struct ScanShare;  // data/token_scan_share.h

class IndexedDataset {
 public:
  // Opens and validates PREFIX.idx / PREFIX.bin and scans every token once (min/max id; data/token_scan.h: a few
  // threads for a large .bin, progress lines when it runs long). With vocab_size > 0, a token id outside
  // [0, vocab_size) is an error naming the file and the first such token's sequence, position and byte.
  static IndexedDataset open(const std::string& prefix, int64_t vocab_size = 0);
  // The same, the scan shared with the other processes of `share` (data/token_scan_share.h): collective, every
  // process of the share opens the same corpora in the same order.
  static IndexedDataset open(const std::string& prefix, int64_t vocab_size, const ScanShare& share);
  // Opens and validates the pair without reading the tokens: for what the index alone says (documents, token
  // counts), e.g. the samples of an epoch. min_token() and max_token() are 0.
  static IndexedDataset open_index(const std::string& prefix);

  const std::string& prefix() const { return prefix_; }
  TokenDtype dtype() const { return dtype_; }
  uint64_t num_sequences() const { return num_sequences_; }
  uint64_t num_documents() const { return document_entries_ - 1; }
  uint64_t num_tokens() const { return bin_.size() / token_dtype_size(dtype_); }
  int64_t min_token() const { return min_token_; }  // 0 when the corpus is empty
  int64_t max_token() const { return max_token_; }

  // The .idx's arrays, read from the mapped file: sequence s's length and byte offset in the .bin, and document
  // index entry d (d <= num_documents(): sequence of document d's start, num_sequences() last).
  int32_t sequence_length(uint64_t s) const;
  int64_t sequence_offset(uint64_t s) const;
  int64_t document_index(uint64_t d) const;
  // Stream position (see read_tokens) of document d's first token; d == num_documents() gives
  // num_tokens().
  uint64_t document_token_start(uint64_t d) const;

  // Tokens of sequence `s`, converted to int32 (validated to fit at open).
  std::vector<int32_t> sequence(uint64_t s) const;
  // Tokens of the corpus as one stream (sequences concatenated in file order):
  // out[i] = stream[start + i] for i < count. Requires start + count <= num_tokens().
  void read_tokens(uint64_t start, uint64_t count, int32_t* out) const;

 private:
  IndexedDataset() = default;
  void validate_index();
  // Throws when the sequences do not tile the .bin: first_gap and end (the last sequence's end in bytes) come from
  // validate_index's single pass over the arrays.
  void check_sequences_tile_bin(const char* index_file, std::optional<uint64_t> first_gap, int64_t end) const;
  uint64_t token_start(uint64_t s) const;   // stream position of sequence s's first token; S gives num_tokens()
  uint64_t sequence_holding(uint64_t position) const;  // the sequence of stream position < num_tokens()
  std::string described_bin_bytes() const;  // the .bin size the .idx expects, for messages
  std::string remake_hint() const;          // how to get a matching pair again
  void scan_tokens(int64_t vocab_size, const ScanShare* share);

  std::string prefix_;
  TokenDtype dtype_ = TokenDtype::uint16;
  uint64_t num_sequences_ = 0;
  uint64_t document_entries_ = 0;
  MappedFile idx_;
  // The .idx's arrays inside idx_ (little-endian, not aligned for their types: read with memcpy).
  const uint8_t* lengths_ = nullptr;    // int32[S]
  const uint8_t* offsets_ = nullptr;    // int64[S]
  const uint8_t* documents_ = nullptr;  // int64[D]
  MappedFile bin_;
  int64_t min_token_ = 0;
  int64_t max_token_ = 0;
};

// Writes an indexed dataset the way Megatron's IndexedDatasetBuilder does (one sequence per
// document unless add_sequence/end_document are used). Files appear under their final names only
// at finalize() (written as *.tmp, fsynced, then renamed), so a reader never sees a half-written
// corpus; a failed finalize() or a writer destroyed before it leaves no *.tmp behind. Replacing an
// existing PREFIX removes its old .idx before the renames, so a crash between them leaves a .bin
// without an .idx, never a .bin beside an .idx of other data (replace_pair in the .cpp says why).
class IndexedDatasetWriter {
 public:
  IndexedDatasetWriter(const std::string& prefix, TokenDtype dtype);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  void add_document(std::span<const int32_t> tokens);  // one sequence + end_document()
  void add_sequence(std::span<const int32_t> tokens);
  void end_document();
  void finalize();

  uint64_t num_tokens() const { return num_tokens_; }

 private:
  void replace_pair(const std::string& idx_tmp);

  std::string prefix_;
  TokenDtype dtype_;
  std::FILE* bin_ = nullptr;
  std::vector<int32_t> sequence_lengths_;
  std::vector<int64_t> document_index_{0};
  uint64_t num_tokens_ = 0;
  std::vector<uint8_t> scratch_;
  bool finalized_ = false;
};

}  // namespace sg::data

#pragma once
// safetensors (https://github.com/huggingface/safetensors) reader and writer:
//   uint64 little-endian N | N bytes of JSON header, padded with spaces so 8 + N is a multiple of 8
//   | tensor bytes, row-major, little-endian, contiguous in header order without gaps.
// Header: {"__metadata__": {"format": "pt", ...}, "NAME": {"dtype": "F32", "shape": [..],
//          "data_offsets": [begin, end]}, ...}, offsets relative to the start of the tensor bytes.
// The API is generic: callers (model, optimizer) pass lists of named host tensors.
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/file_checksum.h"
#include "core/f16_bits.h"
#include "data/mapped_file.h"

namespace sg::checkpoint {

// F16: Hugging Face folders saved in float16; the weight loaders widen it to float exactly.
enum class TensorDtype : uint8_t { F32, BF16, I32, I64, F16 };

const char* dtype_name(TensorDtype dtype);  // safetensors spelling: "F32", "BF16", "I32", "I64", "F16"
size_t dtype_size(TensorDtype dtype);
bool parse_dtype(const std::string& name, TensorDtype& out);
bool is_floating(TensorDtype dtype);  // F32, BF16, F16

// f16_bits_to_float (IEEE binary16 bits -> float, exact) is core/f16_bits.h's.
// Element i of a floating-point tensor's little-endian bytes as float: exact for F32, BF16 and F16.
float float_element(TensorDtype dtype, const void* data, int64_t i);

std::string shape_string(const std::vector<int64_t>& shape);  // "[4, 16]"
int64_t num_elements(const std::vector<int64_t>& shape);

// A host tensor to save (data points at num_elements(shape) * dtype_size(dtype) bytes).
struct TensorRef {
  std::string name;
  TensorDtype dtype = TensorDtype::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

// A host tensor to load into: the expectation the checkpoint must meet, and where its bytes go.
struct TensorDest {
  std::string name;
  TensorDtype dtype = TensorDtype::F32;
  std::vector<int64_t> shape;
  void* data = nullptr;
};

// Called while a file is written: (path, bytes written so far, total bytes). Lets tests inject a
// crash in the middle of a save; nullptr for none.
using WriteProgressHook =
    std::function<void(const std::string& path, uint64_t written, uint64_t total)>;

// The complete file bytes' header part (length prefix + padded JSON), for writers and tests.
std::string safetensors_header(std::span<const TensorRef> tensors,
                               const std::map<std::string, std::string>& metadata);

// Writes `path` (plain write + fsync; atomicity comes from the checkpoint directory protocol).
// Metadata always includes "format": "pt", which transformers requires. Names must be unique.
// Returns the written file's size and CRC-32.
FileDigest write_safetensors(const std::string& path, std::span<const TensorRef> tensors,
                       const std::map<std::string, std::string>& metadata = {},
                       const WriteProgressHook& hook = nullptr);

// "checkpoint file PATH does not match the model config: N tensors differ ...:" + one line each.
std::string format_differences(const std::string& path, const std::vector<std::string>& diffs);

// A parsed, validated, memory-mapped safetensors file.
class SafetensorsFile {
 public:
  struct Entry {
    std::string name;
    TensorDtype dtype;
    std::vector<int64_t> shape;
    const uint8_t* data;
    uint64_t nbytes;
  };

  // sg::Error naming the path for: missing file, truncated header, invalid JSON, dtypes it cannot read
  // (one error listing every such tensor), offsets that disagree with shape x dtype, overlap or gaps, data
  // beyond the end of the file.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<Entry>& tensors() const { return entries_; }  // in file order
  const Entry* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Checks that the file holds exactly `expected` (names, shapes, dtypes). On any difference throws
  // one sg::Error listing every missing, unexpected, reshaped or retyped tensor; otherwise copies
  // each tensor's bytes into its dest.data.
  void load_into(std::span<const TensorDest> expected) const;
  // The parts of load_into, for loaders that validate several files before copying any:
  // one line per differing tensor ("missing ...", "different ...", "unexpected ..."), and the copy.
  std::vector<std::string> differences(std::span<const TensorDest> expected) const;
  void copy_into(std::span<const TensorDest> expected) const;

 private:
  data::MappedFile file_;
  std::vector<Entry> entries_;
  std::map<std::string, size_t> by_name_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace sg::checkpoint

#pragma once
// A read-only view of a flat fp32 array the size of the parameter buffer (model/param_builder.h): the main weights or
// an Adam moment as a checkpoint holds it. Its values need not lie in one host buffer: a checkpoint file stores one
// tensor after another in the Hugging Face tensor order, while the flat buffer places decayed blocks first and leaves
// alignment gaps, so a view of a memory-mapped file is one piece per tensor; a Hugging Face folder's pieces may be
// bf16 or fp16, widened exactly as they are read. Loaders (TrainStep::load_state, CpuModel::load_state) read it chunk
// by chunk, so a resume or a pretrained start needs no host copy of the whole state.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sg::model {

// The elements TrainStep::load_state converts and uploads at a time: its host buffers hold that many fp32 values and
// their bf16 bits (kUploadChunkBytes, whatever the model's size).
inline constexpr int64_t kUploadChunkElements = int64_t{4} << 20;
inline constexpr int64_t kUploadChunkBytes = kUploadChunkElements * (4 + 2);

class FlatView {
 public:
  enum class Element : uint8_t { f32, bf16, f16 };  // how a piece's values are stored (little-endian)
  // Flat elements [offset, offset + count): `count` values at `data`, at any alignment (a mapped file's tensor data
  // starts wherever its header ends).
  struct Piece {
    int64_t offset = 0;
    int64_t count = 0;
    const std::byte* data = nullptr;
    Element element = Element::f32;
  };

  FlatView() = default;  // size 0
  // One piece: the whole of `values` (a host vector; it must outlive the view).
  FlatView(std::span<const float> values);  // NOLINT: implicit on purpose
  FlatView(const std::vector<float>& values) : FlatView(std::span<const float>(values)) {}  // NOLINT: as a span
  // `size` elements made of `pieces` (any order; they must not overlap or leave [0, size)); elements no piece covers
  // are zero (the layout's alignment gaps). sg::Error otherwise.
  FlatView(int64_t size, std::vector<Piece> pieces);
  // `size` zeros without any memory behind them (a fresh optimizer's moments).
  static FlatView zeros(int64_t size);

  int64_t size() const { return size_; }
  bool is_zeros() const { return pieces_.empty(); }  // no piece: every element zero (zeros(), or size 0)
  // Copies elements [begin, end) into out[0, end - begin): the pieces' values (bf16 and fp16 widened exactly), zero in
  // between.
  void read(int64_t begin, int64_t end, float* out) const;
  std::vector<float> to_vector() const;  // every element (tests, small models)

 private:
  int64_t size_ = 0;
  std::vector<Piece> pieces_;  // sorted by offset, disjoint
};

}  // namespace sg::model

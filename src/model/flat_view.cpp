#include "model/flat_view.h"

#include <algorithm>
#include <cstring>

#include "core/bf16_bits.h"
#include "core/error.h"
#include "core/f16_bits.h"
#include "core/strings.h"

namespace sg::model {

FlatView::FlatView(std::span<const float> values) : size_(static_cast<int64_t>(values.size())) {
  if (!values.empty()) {
    pieces_.push_back({.offset = 0, .count = size_, .data = reinterpret_cast<const std::byte*>(values.data())});
  }
}

FlatView::FlatView(int64_t size, std::vector<Piece> pieces) : size_(size), pieces_(std::move(pieces)) {
  SG_CHECK(size >= 0, "FlatView: negative size");
  std::erase_if(pieces_, [](const Piece& p) { return p.count == 0; });
  std::sort(pieces_.begin(), pieces_.end(), [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
  int64_t end = 0;
  for (const Piece& p : pieces_) {
    SG_CHECK(
        p.offset >= end && p.count > 0 && p.count <= size - p.offset && p.data != nullptr,
        strprintf("FlatView: piece [%lld, +%lld) overlaps another or leaves [0, %lld)",
                  static_cast<long long>(p.offset), static_cast<long long>(p.count), static_cast<long long>(size)));
    end = p.offset + p.count;
  }
}

FlatView FlatView::zeros(int64_t size) {
  return FlatView(size, {});
}

void FlatView::read(int64_t begin, int64_t end, float* out) const {
  SG_CHECK(0 <= begin && begin <= end && end <= size_,
           strprintf("FlatView::read [%lld, %lld) of %lld elements", static_cast<long long>(begin),
                     static_cast<long long>(end), static_cast<long long>(size_)));
  // The first piece that ends after `begin`.
  auto it = std::upper_bound(pieces_.begin(), pieces_.end(), begin,
                             [](int64_t i, const Piece& p) { return i < p.offset + p.count; });
  int64_t at = begin;
  for (; at < end && it != pieces_.end() && it->offset < end; ++it) {
    if (it->offset > at) std::fill(out + (at - begin), out + (it->offset - begin), 0.0f);
    at = std::max(at, it->offset);
    const int64_t stop = std::min(end, it->offset + it->count);
    float* to = out + (at - begin);
    // memcpy: the piece may be unaligned for its type.
    if (it->element == Element::f32) {
      std::memcpy(to, it->data + (at - it->offset) * 4, static_cast<size_t>(stop - at) * 4);
    } else {
      const std::byte* from = it->data + (at - it->offset) * 2;
      for (int64_t i = 0; i < stop - at; ++i) {
        uint16_t bits = 0;
        std::memcpy(&bits, from + i * 2, 2);
        to[i] = it->element == Element::bf16 ? bf16_bits_to_float(bits) : f16_bits_to_float(bits);
      }
    }
    at = stop;
  }
  if (at < end) std::fill(out + (at - begin), out + (end - begin), 0.0f);
}

std::vector<float> FlatView::to_vector() const {
  std::vector<float> out(static_cast<size_t>(size_));
  read(0, size_, out.data());
  return out;
}

}  // namespace sg::model

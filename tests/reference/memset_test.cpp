// reference/memset.h, the CPU twin of a CUDA memset node, on its own (tests/graph/memset_nodes_test.cpp uses
// it as the ground truth for the graph layer's fill job, so a wrong twin would pass there unseen): each
// element is the low element_size bytes of value, little-endian (what the GPU stores); rows are
// pitch bytes apart and the bytes between rows (pitch > row) and after the last row are never written;
// no rows or no elements write nothing; dst need not be aligned.
#include "reference/memset.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace sg {
namespace {

constexpr unsigned char kUntouched = 0x5A;

TEST(MemsetReference, OneRowOfEachElementSizeIsTheLowBytesLittleEndian) {
  std::vector<unsigned char> b(8, kUntouched);
  ref::memset_elements(b.data(), 0, 0xA1B2C3D4u, 1, 3, 1);
  EXPECT_EQ(b, (std::vector<unsigned char>{0xD4, 0xD4, 0xD4, 0x5A, 0x5A, 0x5A, 0x5A, 0x5A}));

  b.assign(8, kUntouched);
  ref::memset_elements(b.data(), 0, 0xA1B2C3D4u, 2, 3, 1);
  EXPECT_EQ(b, (std::vector<unsigned char>{0xD4, 0xC3, 0xD4, 0xC3, 0xD4, 0xC3, 0x5A, 0x5A}));

  b.assign(10, kUntouched);
  ref::memset_elements(b.data(), 0, 0xA1B2C3D4u, 4, 2, 1);
  EXPECT_EQ(b, (std::vector<unsigned char>{0xD4, 0xC3, 0xB2, 0xA1, 0xD4, 0xC3, 0xB2, 0xA1, 0x5A, 0x5A}));
}

// The bytes a 4-byte element is stored as are the same as the value stored as a uint32_t on a little-endian
// host (what the GPU sees); 1.0f's bits fill a float buffer with 1.0f.
TEST(MemsetReference, FourByteElementsReadBackAsTheValue) {
  std::vector<float> f(5, 0.0f);
  uint32_t one_bits = 0;
  const float one = 1.0f;
  static_assert(sizeof(one_bits) == sizeof(one));
  std::memcpy(&one_bits, &one, sizeof(one));
  ref::memset_elements(reinterpret_cast<unsigned char*>(f.data()), 0, one_bits, 4, 4, 1);
  EXPECT_EQ(f, (std::vector<float>{1, 1, 1, 1, 0}));
}

// Rows pitch bytes apart: the gap after each row and everything past the last row keep their bytes.
TEST(MemsetReference, RowsArePitchApartAndGapsAreUntouched) {
  // 3 rows of 2 two-byte elements (4 bytes), pitch 7.
  std::vector<unsigned char> b(24, kUntouched);
  ref::memset_elements(b.data(), 7, 0x0000BEEFu, 2, 2, 3);
  const std::vector<unsigned char> row = {0xEF, 0xBE, 0xEF, 0xBE}, gap = {0x5A, 0x5A, 0x5A};
  std::vector<unsigned char> expected;
  for (int r = 0; r < 3; ++r) {
    expected.insert(expected.end(), row.begin(), row.end());
    if (r < 2) expected.insert(expected.end(), gap.begin(), gap.end());
  }
  expected.resize(24, kUntouched);
  EXPECT_EQ(b, expected);
}

// pitch == the row's bytes: one contiguous run; height 1 ignores the pitch.
TEST(MemsetReference, APitchOfOneRowIsContiguousAndOneRowIgnoresIt) {
  std::vector<unsigned char> b(9, kUntouched);
  ref::memset_elements(b.data(), 2, 0x11u, 1, 2, 4);
  EXPECT_EQ(b, (std::vector<unsigned char>{0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x5A}));
  b.assign(9, kUntouched);
  ref::memset_elements(b.data(), 1000, 0x22u, 1, 3, 1);
  EXPECT_EQ(b, (std::vector<unsigned char>{0x22, 0x22, 0x22, 0x5A, 0x5A, 0x5A, 0x5A, 0x5A, 0x5A}));
}

TEST(MemsetReference, NoRowsOrNoElementsWriteNothing) {
  std::vector<unsigned char> b(16, kUntouched);
  ref::memset_elements(b.data(), 8, 0xFFFFFFFFu, 4, 2, 0);
  EXPECT_EQ(b, std::vector<unsigned char>(16, kUntouched));
  ref::memset_elements(b.data(), 8, 0xFFFFFFFFu, 4, 0, 2);
  EXPECT_EQ(b, std::vector<unsigned char>(16, kUntouched));
}

// dst at an odd address (the twin does not require the driver's alignment): the bytes before stay.
TEST(MemsetReference, AnUnalignedStartWritesOnlyFromThere) {
  std::vector<unsigned char> b(8, kUntouched);
  ref::memset_elements(b.data() + 1, 0, 0x00000102u, 2, 2, 1);
  EXPECT_EQ(b, (std::vector<unsigned char>{0x5A, 0x02, 0x01, 0x02, 0x01, 0x5A, 0x5A, 0x5A}));
}

// Value 0 clears, whatever was there.
TEST(MemsetReference, ZeroClears) {
  std::vector<unsigned char> b(6, 0xFF);
  ref::memset_elements(b.data(), 3, 0u, 2, 1, 2);
  EXPECT_EQ(b, (std::vector<unsigned char>{0, 0, 0xFF, 0, 0, 0xFF}));
}

}  // namespace
}  // namespace sg

// The fill job that replaces a memset node, on the CPU: memset_fill_job + memset_fill_byte (the byte the
// fill kernel writes at an address) must reproduce ref::memset_elements for every element size, value,
// alignment and pitch; parameters the driver would reject are refused with the field named.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "graph/memset_nodes.h"
#include "reference/memset.h"

namespace sg::graph {
namespace {

struct Case {
  size_t offset;  // bytes from a 16-byte-aligned base
  unsigned element_size;
  uint32_t value;
  size_t width;   // elements per row
  size_t height;
  size_t pitch;   // bytes; used when height > 1
};

// Applies the job with memset_fill_byte over its rows, the way the kernel does.
void apply_job(const MemsetFillJob& job, unsigned char* base_of_buffer, uintptr_t device_base) {
  for (size_t r = 0; r < job.rows; ++r) {
    for (size_t b = 0; b < job.row_bytes; ++b) {
      const size_t rel = static_cast<size_t>(reinterpret_cast<uintptr_t>(job.dst) - device_base) + r * job.pitch + b;
      base_of_buffer[rel] = memset_fill_byte(job, device_base + rel);
    }
  }
}

TEST(MemsetFillJob, MatchesTheReferenceForEveryElementSizeAlignmentAndPitch) {
  std::vector<Case> cases = {
      {0, 1, 0x00, 1, 1, 0},           {3, 1, 0xAB, 17, 1, 0},         {5, 1, 0x1FF, 4095, 1, 0},
      {0, 2, 0xBEEF, 1, 1, 0},         {2, 2, 0x12345, 33, 1, 0},      {6, 2, 0xFFFF, 1000, 1, 0},
      {0, 4, 0xDEADBEEF, 3, 1, 0},     {4, 4, 0x01020304, 1031, 1, 0}, {12, 4, 0x3F800000, 8, 1, 0},
      {1, 1, 0x7E, 13, 5, 29},         {2, 2, 0xA5C3, 7, 4, 18},       {8, 4, 0xCAFEF00D, 5, 3, 24},
      {3, 1, 0xAB, 17, 0, 32},  // zero rows: nothing written
  };
  // Random extra cases, each aligned to its element size as the driver requires.
  std::mt19937 gen(7);
  for (int i = 0; i < 40; ++i) {
    const unsigned es = 1u << (gen() % 3);
    Case c;
    c.element_size = es;
    c.offset = (gen() % 16) / es * es;
    c.value = static_cast<uint32_t>(gen());
    c.width = gen() % 300;
    c.height = 1 + gen() % 4;
    c.pitch = (c.width * es + gen() % 40) / es * es;
    if (c.pitch < c.width * es) c.pitch += es;
    cases.push_back(c);
  }

  for (const Case& c : cases) {
    const size_t span = c.offset + (c.height > 1 ? (c.height - 1) * c.pitch : 0) + c.width * c.element_size;
    std::vector<unsigned char> expected(span + 32, 0x5A), got(span + 32, 0x5A);
    // A pretend device base address, 16-byte aligned like cudaMalloc's.
    const uintptr_t device_base = 0x7f0000000000ull;
    cudaMemsetParams p{};
    p.dst = reinterpret_cast<void*>(device_base + c.offset);
    p.pitch = c.pitch;
    p.value = c.value;
    p.elementSize = c.element_size;
    p.width = c.width;
    p.height = c.height;
    ref::memset_elements(expected.data() + c.offset, c.pitch, c.value, c.element_size, c.width, c.height);
    apply_job(memset_fill_job(p), got.data(), device_base);
    const std::string what = "offset " + std::to_string(c.offset) + " es " + std::to_string(c.element_size) +
                             " width " + std::to_string(c.width) + " height " + std::to_string(c.height) +
                             " pitch " + std::to_string(c.pitch);
    ASSERT_EQ(got, expected) << what;
  }
}

TEST(MemsetFillJob, RefusesWhatTheDriverWouldReject) {
  auto message = [](cudaMemsetParams p) -> std::string {
    try {
      (void)memset_fill_job(p);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  cudaMemsetParams p{};
  p.dst = reinterpret_cast<void*>(0x1000);
  p.width = 4;
  p.height = 1;
  p.elementSize = 3;
  EXPECT_NE(message(p).find("elementSize 3"), std::string::npos);
  p.elementSize = 4;
  p.dst = reinterpret_cast<void*>(0x1002);
  EXPECT_NE(message(p).find("not aligned"), std::string::npos);
  p.dst = reinterpret_cast<void*>(0x1000);
  p.height = 2;
  p.pitch = 6;
  EXPECT_NE(message(p).find("pitch 6"), std::string::npos);
  p.pitch = 8;
  EXPECT_NE(message(p).find("smaller than a row"), std::string::npos);
  p.pitch = 16;
  EXPECT_EQ(message(p), "");
}

}  // namespace
}  // namespace sg::graph

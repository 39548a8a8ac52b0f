// The library workspace registry (cuda/library_workspaces.h): ranges count while registered, whole ranges
// only, shared registrations of one range, moves keep exactly one registration.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "cuda/library_workspaces.h"

namespace sg::cuda {
namespace {

TEST(LibraryWorkspaces, WholeRangesInsideARegistrationOnly) {
  std::vector<char> memory(1024);  // any address range will do: the registry never dereferences
  const char* base = memory.data();
  EXPECT_FALSE(inside_library_workspace(base + 16, 4));
  {
    const LibraryWorkspace ws(base + 256, 512);
    EXPECT_TRUE(inside_library_workspace(base + 256, 4));
    EXPECT_TRUE(inside_library_workspace(base + 764, 4));
    EXPECT_TRUE(inside_library_workspace(base + 256, 512));
    EXPECT_FALSE(inside_library_workspace(base + 765, 4)) << "straddles the end";
    EXPECT_FALSE(inside_library_workspace(base + 252, 8)) << "straddles the start";
    EXPECT_FALSE(inside_library_workspace(base + 256, 0)) << "an empty range is nobody's";
    EXPECT_FALSE(inside_library_workspace(nullptr, 4));
  }
  EXPECT_FALSE(inside_library_workspace(base + 256, 4)) << "unregistered with its object";
}

TEST(LibraryWorkspaces, SharedAndMovedRegistrations) {
  std::vector<char> memory(256);
  const char* p = memory.data();
  LibraryWorkspace a(p, 256);
  {
    const LibraryWorkspace b(p, 256);  // a second layer sharing the same workspace
    EXPECT_TRUE(inside_library_workspace(p, 8));
  }
  EXPECT_TRUE(inside_library_workspace(p, 8)) << "the first registration still holds";
  LibraryWorkspace moved(std::move(a));
  EXPECT_TRUE(inside_library_workspace(p, 8));
  LibraryWorkspace assigned;
  assigned = std::move(moved);
  EXPECT_TRUE(inside_library_workspace(p, 8));
  assigned = LibraryWorkspace();
  EXPECT_FALSE(inside_library_workspace(p, 8)) << "the last registration was released by the assignment";
  const LibraryWorkspace null_range(nullptr, 64);
  EXPECT_FALSE(inside_library_workspace(nullptr, 8));
}

}  // namespace
}  // namespace sg::cuda

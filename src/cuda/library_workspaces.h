#pragma once
// Device memory handed to a library (cuBLASLt, cuDNN) as its workspace. Only that library's kernels, and the
// memsets it enqueues before them, touch it: no kernel of ours reads or writes it. The graph rewrite
// (graph/workspace_memsets.h) relies on that to take the library's small workspace memsets (a tile counter
// cleared before each persistent GEMM or attention launch) off the step's critical path.
#include <cstddef>

namespace sg::cuda {

// Registers [ptr, ptr + bytes) for the object's lifetime. Registering the same range more than once (layers
// that share one workspace) is allowed.
class LibraryWorkspace {
 public:
  LibraryWorkspace() = default;
  LibraryWorkspace(const void* ptr, size_t bytes);
  ~LibraryWorkspace();
  LibraryWorkspace(LibraryWorkspace&& other) noexcept;
  LibraryWorkspace& operator=(LibraryWorkspace&& other) noexcept;
  LibraryWorkspace(const LibraryWorkspace&) = delete;
  LibraryWorkspace& operator=(const LibraryWorkspace&) = delete;

 private:
  void release() noexcept;
  long id_ = -1;
};

// Whether [ptr, ptr + bytes) lies inside one registered workspace (bytes > 0).
bool inside_library_workspace(const void* ptr, size_t bytes);

}  // namespace sg::cuda

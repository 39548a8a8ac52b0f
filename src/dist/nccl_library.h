#pragma once
// NCCL, loaded at run time (dlopen) rather than linked: a stepgraph binary starts on any machine, runs
// single-GPU without NCCL at all, and finds the libnccl.so.2 that the machine has — the CUDA toolkit's,
// a system package's, or the one PyTorch's wheels bring (nvidia-nccl-cu13) — with a clear error that
// lists every place looked when there is none. Compiled against the toolkit's nccl.h (dist/nccl_api.h,
// private to src/dist); only functions whose ABI NCCL 2.x keeps stable are used (no ncclConfig_t),
// and the library must be NCCL >= 2.19.
//
// Search order:
//   1. STEPGRAPH_NCCL_LIBRARY (a path to libnccl.so.2): only that file
//   2. the dynamic loader's own search (LD_LIBRARY_PATH, the executable's RUNPATH, ld.so.cache)
//   3. the CUDA toolkit that stepgraph was built with, then /usr/local/cuda/lib64 and /usr/local/cuda/lib
//   4. Python environments: $VIRTUAL_ENV, $CONDA_PREFIX, /opt/*/.venv, /opt/*, /usr/local, /usr
//      (…/lib/python3*/{site,dist}-packages/nvidia/nccl/lib/libnccl.so.2)
#include <string>
#include <vector>

namespace sg::dist {

inline constexpr int kMinNcclVersionCode = 21900;  // 2.19.0

struct NcclLibraryInfo {
  std::string path;      // the file that was loaded
  int version_code = 0;  // NCCL_VERSION_CODE of the loaded library (22803 for 2.28.3)
  std::string version() const;  // "2.28.3"
};

// Loads NCCL on first use (thread-safe). Throws sg::Error listing the paths tried, or naming the library
// that is too old or lacks a function, with the fix.
const NcclLibraryInfo& load_nccl();

// The candidate paths of steps 3 and 4 that exist on this machine, in search order.
std::vector<std::string> nccl_candidate_paths();

}  // namespace sg::dist

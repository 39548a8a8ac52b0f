#pragma once
// The NCCL functions stepgraph calls, resolved from the library dist/nccl_library.h loads. Private to
// src/dist: only its .cpp files include nccl.h.
#include <nccl.h>

#include "dist/nccl_library.h"

namespace sg::dist {

struct NcclApi {
  decltype(&::ncclGetVersion) GetVersion = nullptr;
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRank) CommInitRank = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  decltype(&::ncclGetLastError) GetLastError = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  decltype(&::ncclReduceScatter) ReduceScatter = nullptr;
  decltype(&::ncclReduce) Reduce = nullptr;
  decltype(&::ncclAllGather) AllGather = nullptr;
  NcclLibraryInfo info;
};

// Loads NCCL on first use and returns its functions (sg::Error as load_nccl()).
const NcclApi& nccl();

// Throws sg::Error "<what> failed: <ncclGetErrorString>: <ncclGetLastError>" plus a hint, unless ok.
void check_nccl(ncclResult_t result, const char* what, ncclComm_t comm = nullptr);

}  // namespace sg::dist

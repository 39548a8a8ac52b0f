#include "dist/nccl_api.h"

#include <dlfcn.h>
#include <glob.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "core/error.h"
#include "core/strings.h"

#ifndef SG_NCCL_TOOLKIT_LIBRARY_DIR
#define SG_NCCL_TOOLKIT_LIBRARY_DIR ""
#endif

namespace sg::dist {
namespace {

constexpr const char* kSoname = "libnccl.so.2";

void add_glob(const std::string& pattern, std::vector<std::string>& out) {
  glob_t g{};
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
}

template <class F>
bool bind(void* handle, const char* name, F& out) {
  out = reinterpret_cast<F>(::dlsym(handle, name));
  return out != nullptr;
}

NcclApi load() {
  std::vector<std::string> tried;
  void* handle = nullptr;
  std::string path;
  const auto attempt = [&](const std::string& candidate) {
    if (handle != nullptr) return;
    handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      path = candidate;
    } else {
      const char* why = ::dlerror();
      tried.push_back(candidate + (why ? std::string(" (") + why + ")" : std::string()));
    }
  };
  if (const char* forced = std::getenv("STEPGRAPH_NCCL_LIBRARY"); forced != nullptr && *forced != '\0') {
    attempt(forced);
    if (handle == nullptr) {
      throw Error("STEPGRAPH_NCCL_LIBRARY = " + std::string(forced) + " cannot be loaded: " + join(tried, "; ") +
                  ". Point it at a libnccl.so.2, or unset it to let stepgraph search");
    }
  } else {
    attempt(kSoname);
    for (const std::string& candidate : nccl_candidate_paths()) attempt(candidate);
  }
  if (handle == nullptr) {
    throw Error("data parallelism needs NCCL, and no " + std::string(kSoname) + " was found. Tried: " +
                join(tried, "; ") +
                ". Install NCCL (the CUDA toolkit's, a libnccl2 package, or pip install nvidia-nccl-cu13), then set "
                "STEPGRAPH_NCCL_LIBRARY=/path/to/libnccl.so.2 or add its folder to LD_LIBRARY_PATH");
  }
  if (path == kSoname) {
    // Report the real file the loader picked.
    char origin[4096] = {0};
    if (::dlinfo(handle, RTLD_DI_ORIGIN, origin) == 0) path = std::string(origin) + "/" + kSoname;
  }
  NcclApi api;
  api.info.path = path;
  bool ok = bind(handle, "ncclGetVersion", api.GetVersion);
  ok = bind(handle, "ncclGetUniqueId", api.GetUniqueId) && ok;
  ok = bind(handle, "ncclCommInitRank", api.CommInitRank) && ok;
  ok = bind(handle, "ncclCommDestroy", api.CommDestroy) && ok;
  ok = bind(handle, "ncclCommAbort", api.CommAbort) && ok;
  ok = bind(handle, "ncclCommGetAsyncError", api.CommGetAsyncError) && ok;
  ok = bind(handle, "ncclGetErrorString", api.GetErrorString) && ok;
  ok = bind(handle, "ncclGetLastError", api.GetLastError) && ok;
  ok = bind(handle, "ncclAllReduce", api.AllReduce) && ok;
  ok = bind(handle, "ncclReduceScatter", api.ReduceScatter) && ok;
  ok = bind(handle, "ncclReduce", api.Reduce) && ok;
  ok = bind(handle, "ncclAllGather", api.AllGather) && ok;
  if (!ok) throw Error(path + " is not a usable NCCL: it lacks functions stepgraph needs (NCCL >= 2.19 required)");
  if (api.GetVersion(&api.info.version_code) != ncclSuccess || api.info.version_code < kMinNcclVersionCode) {
    throw Error(strprintf("%s is NCCL %s; stepgraph needs NCCL >= 2.19 (set STEPGRAPH_NCCL_LIBRARY to a newer "
                          "libnccl.so.2)",
                          path.c_str(), api.info.version().c_str()));
  }
  // The handle stays open for the life of the process: communicators may outlive any object here.
  return api;
}

}  // namespace

std::string NcclLibraryInfo::version() const {
  // NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9.
  return strprintf("%d.%d.%d", version_code / 10000, (version_code / 100) % 100, version_code % 100);
}

std::vector<std::string> nccl_candidate_paths() {
  std::vector<std::string> dirs;
  if (*SG_NCCL_TOOLKIT_LIBRARY_DIR != '\0') dirs.emplace_back(SG_NCCL_TOOLKIT_LIBRARY_DIR);
  dirs.emplace_back("/usr/local/cuda/lib64");
  dirs.emplace_back("/usr/local/cuda/lib");
  std::vector<std::string> out;
  for (const std::string& d : dirs) {
    const std::string p = d + "/" + kSoname;
    std::error_code ec;
    if (std::filesystem::exists(p, ec)) out.push_back(p);
  }
  std::vector<std::string> roots;
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') roots.emplace_back(v);
  }
  roots.emplace_back("/opt/*/.venv");
  roots.emplace_back("/opt/*");
  roots.emplace_back("/usr/local");
  roots.emplace_back("/usr");
  for (const std::string& root : roots) {
    for (const char* packages : {"site-packages", "dist-packages"}) {
      add_glob(root + "/lib/python3*/" + packages + "/nvidia/nccl/lib/" + kSoname, out);
    }
  }
  std::vector<std::string> unique;
  for (const std::string& p : out) {
    if (std::find(unique.begin(), unique.end(), p) == unique.end()) unique.push_back(p);
  }
  return unique;
}

const NcclApi& nccl() {
  static std::once_flag once;
  static NcclApi* api = nullptr;
  static std::string error;
  std::call_once(once, [] {
    try {
      api = new NcclApi(load());  // never freed: usable from at-exit cleanup in any order
    } catch (const Error& e) {
      error = e.what();
    }
  });
  if (api == nullptr) throw Error(error);
  return *api;
}

const NcclLibraryInfo& load_nccl() { return nccl().info; }

void check_nccl(ncclResult_t result, const char* what, ncclComm_t comm) {
  if (result == ncclSuccess) return;
  const NcclApi& api = nccl();
  std::string text = strprintf("%s failed: %s", what, api.GetErrorString(result));
  if (const char* last = api.GetLastError(comm); last != nullptr && *last != '\0') text += std::string(": ") + last;
  switch (result) {
    case ncclSystemError:
    case ncclRemoteError:
      text += ". A rank may have died or the network between ranks failed; NCCL_DEBUG=WARN (or INFO) shows "
              "NCCL's view, NCCL_SOCKET_IFNAME picks the network interface";
      break;
    case ncclInvalidUsage:
    case ncclInvalidArgument:
      text += ". Every rank must run the same collectives in the same order with the same sizes";
      break;
    default:
      text += ". NCCL_DEBUG=INFO shows NCCL's view";
      break;
  }
  throw Error(text);
}

}  // namespace sg::dist

#pragma once
// cuBLASLt status checking that names the call and the file:line (sg::Error).
#include <cublasLt.h>

#include <cstdio>
#include <string>

#include "core/error.h"

namespace sg::kernels {

[[noreturn]] inline void throw_cublaslt_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw ::sg::Error(std::string(call) + " failed: " + cublasLtGetStatusName(status) + ": " +
                    cublasLtGetStatusString(status) + " at " + file + ":" + std::to_string(line));
}

// The same message, logged to stderr instead of thrown: for destructors and other noexcept paths.
inline void log_cublaslt_error(cublasStatus_t status, const char* call, const char* file, int line) noexcept {
  std::fprintf(stderr, "error: %s failed: %s: %s at %s:%d\n", call, cublasLtGetStatusName(status),
               cublasLtGetStatusString(status), file, line);
}

}  // namespace sg::kernels

// SG_CUBLASLT_CHECK(cublasLtMatmul(...)): throws sg::Error naming the call when the status is not success.
#define SG_CUBLASLT_CHECK(call)                                                               \
  do {                                                                                        \
    const cublasStatus_t sg_status_ = (call);                                                 \
    if (sg_status_ != CUBLAS_STATUS_SUCCESS)                                                  \
      ::sg::kernels::throw_cublaslt_error(sg_status_, #call, __FILE__, __LINE__);             \
  } while (0)

// SG_CUBLASLT_CHECK_NOEXCEPT(cublasLtDestroy(...)): on a cleanup path, logs the failure and goes on.
#define SG_CUBLASLT_CHECK_NOEXCEPT(call)                                                      \
  do {                                                                                        \
    const cublasStatus_t sg_status_ = (call);                                                 \
    if (sg_status_ != CUBLAS_STATUS_SUCCESS)                                                  \
      ::sg::kernels::log_cublaslt_error(sg_status_, #call, __FILE__, __LINE__);               \
  } while (0)

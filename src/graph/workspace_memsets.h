#pragma once
// Library workspace memsets of a captured graph are moved off the critical path.
//
// Why: cuBLASLt clears a 4-byte tile counter in its workspace before every persistent GEMM, and cuDNN one
// before every SDPA launch (forward and backward). Captured, each is a memset node between the kernel before
// and the library kernel after it: 40 of small's 70 memset nodes, 180 of 1b's 218, every one ~1.2 us of serial
// device time. Nothing but the library touches its workspace (cuda/library_workspaces.h), so such a memset
// only has to come after the previous library kernel, not after the kernels of ours in between: the rewrite
// moves its incoming edge up past our kernels, so it runs beside them, and keeps the library kernel after both.
//
// A node counts as ours when its kernel's mangled name is in namespace sg (_ZN2sg...); anything else (a
// library kernel, a memset, an event, a kernel whose name the driver does not give) ends the walk, so the
// rewrite never reorders a memset past a node it cannot vouch for. Only chains are walked: the memset and every
// node it passes have exactly one incoming edge, of the default kind.
#include <cuda_runtime.h>

#include <string>

namespace sg::graph {

// The kernel node's function name as the driver reports it (mangled); "" when it cannot tell.
std::string kernel_node_name(cudaGraphNode_t node);

// Rewrites every memset node of `graph` that writes only inside a registered library workspace as above.
// Returns how many memset nodes were moved.
int hoist_library_workspace_memsets(cudaGraph_t graph);

}  // namespace sg::graph

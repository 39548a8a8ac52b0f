#pragma once
// Slurm hostlist expressions ("gpu-[001-004,010],login1", "rack[1-2]-node[07-08]").
#include <string>
#include <string_view>

namespace sg::dist {

// The first host a Slurm hostlist names: the first top-level comma-separated item with every bracket
// group replaced by the first value of its first range, zero padding kept ("gpu-[001-004,010],x" ->
// "gpu-001"). Throws sg::Error naming `variable` and the text for an unbalanced bracket or an empty list.
std::string first_host(std::string_view hostlist, const std::string& variable = "SLURM_NODELIST");

}  // namespace sg::dist

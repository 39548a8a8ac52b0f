# The argument handling of one tool in bench/ (bench/bench_args.h), run by ctest without a GPU
# (bench/CMakeLists.txt registers one entry per tool):
#   cmake -DTOOL=<executable> -DPROGRAM=<name> -P bench_tool_args.cmake
# --help exits 0 with the usage on stdout before any CUDA call; an unknown flag, and the first flag of the usage
# that takes a value given without one, exit 2 naming the flag and pointing at --help.

# Runs the tool with ARGN; sets rc, out and err.
function(run_tool)
  execute_process(COMMAND ${TOOL} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  set(rc "${rc}" PARENT_SCOPE)
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

# Fails unless the last run exited with `want` and `text` is in its stream `stream` (out or err).
function(expect args want stream text)
  string(FIND "${${stream}}" "${text}" at)
  if(NOT rc STREQUAL "${want}" OR at EQUAL -1)
    message(FATAL_ERROR "${PROGRAM} ${args}: expected exit ${want} and '${text}' on std${stream}\n"
                        "exit status: ${rc}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
endfunction()

run_tool(--help)
expect(--help 0 out "Usage: ${PROGRAM} ")
expect(--help 0 out "-h, --help")

run_tool(--bogus)
expect(--bogus 2 err "${PROGRAM}: unknown flag '--bogus'; see ${PROGRAM} --help")

# The first flag of the usage line that takes a value ("[--iters N]"), given without it.
run_tool(--help)
string(REGEX MATCH "\\[(--[a-z-]+) [A-Z]" value_flag "${out}")
if(value_flag)
  set(flag "${CMAKE_MATCH_1}")
  run_tool(${flag})
  expect(${flag} 2 err "${PROGRAM}: ${flag} needs a value")
endif()

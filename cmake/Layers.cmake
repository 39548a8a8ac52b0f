# One static library per layer of docs/architecture.md: src/<layer>/**.{cpp,cu}.
# A layer links only the layers below it, so an upward include fails to link.
function(sg_layer name)
  cmake_parse_arguments(L "" "" "DEPS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS
       ${CMAKE_SOURCE_DIR}/src/${name}/*.cpp ${CMAKE_SOURCE_DIR}/src/${name}/*.cu)
  set(target sg_${name})
  if(srcs)
    add_library(${target} STATIC ${srcs})
    target_include_directories(${target} PUBLIC ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(${target} PUBLIC ${L_DEPS})
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:${SG_WARNINGS}>
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --expt-relaxed-constexpr -lineinfo>)
    set_target_properties(${target} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF POSITION_INDEPENDENT_CODE ON)
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(${target} INTERFACE ${L_DEPS})
  endif()
endfunction()

# Executables that must run on the GPU machine: no libstdc++ from this machine.
function(sg_portable_executable target)
  target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc)
endfunction()

# One static library per layer of docs/architecture.md: src/<layer>/**.{cpp,cu}.
# A layer links only the layers below it (src/CMakeLists.txt). Every layer has all of src/ as include directory,
# so an upward include of a header-only definition would compile and link: ctest tools/layer_includes_test
# (tests/tools/layer_includes_test.py) checks every #include in src/ against that link graph.
function(sg_layer name)
  cmake_parse_arguments(L "" "" "DEPS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS
       ${CMAKE_SOURCE_DIR}/src/${name}/*.cpp ${CMAKE_SOURCE_DIR}/src/${name}/*.cu)
  list(FILTER srcs EXCLUDE REGEX "_sm90a\\.cu$")  # built by sg_sm90a_sources
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

# src/<layer>/*_sm90a.cu: CUTLASS kernels that need the arch-specific sm_90a target (wgmma, TMA descriptors
# modified on the device). They are compiled for sm_90a ONLY (no sm_90 pass, which would build an empty
# stub of the kernel and double the compile time), with -DNDEBUG, in an object library whose objects go
# into sg_<layer>. The rest of the project keeps CMAKE_CUDA_ARCHITECTURES.
function(sg_sm90a_sources name)
  cmake_parse_arguments(L "" "" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${name}/*_sm90a.cu)
  if(NOT srcs)
    return()
  endif()
  sg_sm90a_object_library(sg_${name}_sm90a SOURCES ${srcs} DEPS ${L_DEPS})
  target_sources(sg_${name} PRIVATE $<TARGET_OBJECTS:sg_${name}_sm90a>)
endfunction()

# An object library of sm_90a-only sources (the flags above); also used by the opt-in tuning targets.
function(sg_sm90a_object_library target)
  cmake_parse_arguments(L "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${target} OBJECT ${L_SOURCES})
  target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(${target} PRIVATE ${L_DEPS})
  target_compile_definitions(${target} PRIVATE NDEBUG)
  target_compile_options(${target} PRIVATE -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr
    -Xcompiler=-Wall,-Wextra)
  set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES OFF CUDA_SEPARABLE_COMPILATION OFF
    POSITION_INDEPENDENT_CODE ON)
endfunction()

# Executables that must run on the GPU machine: no libstdc++ from this machine.
function(sg_portable_executable target)
  target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc)
endfunction()

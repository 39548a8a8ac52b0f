# Every dependency comes from Debian packages, PyPI (installed by scripts/setup.sh) or the CUDA toolkit.
find_package(CUDAToolkit 13 REQUIRED)
find_package(GTest REQUIRED)
find_package(Threads REQUIRED)

# yaml-cpp: the static archive, because the GPU machine has no yaml-cpp shared library.
find_path(YAML_CPP_INCLUDE_DIR yaml-cpp/yaml.h REQUIRED)
find_library(YAML_CPP_STATIC NAMES libyaml-cpp.a REQUIRED)
add_library(sg_yaml_cpp INTERFACE)
target_include_directories(sg_yaml_cpp SYSTEM INTERFACE ${YAML_CPP_INCLUDE_DIR})
target_link_libraries(sg_yaml_cpp INTERFACE ${YAML_CPP_STATIC})

# zlib (CRC-32 of checkpoint files): the static archive, for the same reason.
find_path(ZLIB_INCLUDE_DIR zlib.h REQUIRED)
find_library(ZLIB_STATIC NAMES libz.a REQUIRED)
add_library(sg_zlib INTERFACE)
target_include_directories(sg_zlib SYSTEM INTERFACE ${ZLIB_INCLUDE_DIR})
target_link_libraries(sg_zlib INTERFACE ${ZLIB_STATIC})

find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
find_path(NLOHMANN_JSON_INCLUDE_DIR nlohmann/json.hpp REQUIRED)
add_library(sg_header_deps INTERFACE)
target_include_directories(sg_header_deps SYSTEM INTERFACE ${CLI11_INCLUDE_DIR} ${NLOHMANN_JSON_INCLUDE_DIR})

# cuDNN runtime from the toolkit; the cudnn-frontend C++ headers from PyPI (scripts/setup.sh puts them in .deps/).
find_library(CUDNN_LIBRARY NAMES cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
  HINTS ${CMAKE_SOURCE_DIR}/.deps/pip/include REQUIRED
  DOC "cudnn_frontend.h from PyPI nvidia-cudnn-frontend: run scripts/setup.sh")
add_library(sg_cudnn INTERFACE)
target_include_directories(sg_cudnn SYSTEM INTERFACE ${CUDNN_FRONTEND_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(sg_cudnn INTERFACE ${CUDNN_LIBRARY})

# protobuf-lite (Debian libprotobuf-dev + protobuf-compiler): the static archive, so the binaries carry it
# to the GPU machine; it encodes TensorBoard event files (src/train/tensorboard_writer.h).
find_program(SG_PROTOC protoc REQUIRED DOC "protoc from Debian protobuf-compiler: run scripts/setup.sh")
find_path(PROTOBUF_INCLUDE_DIR google/protobuf/message_lite.h REQUIRED)
find_library(PROTOBUF_LITE_STATIC NAMES libprotobuf-lite.a REQUIRED
  DOC "libprotobuf-lite.a from Debian libprotobuf-dev: run scripts/setup.sh")
add_library(sg_protobuf_lite INTERFACE)
target_include_directories(sg_protobuf_lite SYSTEM INTERFACE ${PROTOBUF_INCLUDE_DIR})
target_link_libraries(sg_protobuf_lite INTERFACE ${PROTOBUF_LITE_STATIC} Threads::Threads)

# C++ for a .proto under src/ (generated into the build tree at build time), compiled into `target`.
function(sg_protobuf_sources target proto)
  get_filename_component(stem ${proto} NAME_WE)
  get_filename_component(dir ${proto} DIRECTORY)
  set(out ${CMAKE_BINARY_DIR}/generated)
  set(cc ${out}/${dir}/${stem}.pb.cc)
  add_custom_command(OUTPUT ${cc} ${out}/${dir}/${stem}.pb.h
    COMMAND ${CMAKE_COMMAND} -E make_directory ${out}
    COMMAND ${SG_PROTOC} --cpp_out=${out} -I ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/src/${proto}
    DEPENDS ${CMAKE_SOURCE_DIR}/src/${proto}
    COMMENT "protoc ${proto}")
  target_sources(${target} PRIVATE ${cc})
  set_source_files_properties(${cc} PROPERTIES COMPILE_OPTIONS "-w")
  target_include_directories(${target} PUBLIC ${out})  # tests read the events with the same classes
  target_link_libraries(${target} PUBLIC sg_protobuf_lite)
endfunction()

# CUTLASS/CuTe C++ headers from PyPI nvidia-cutlass (scripts/setup.sh puts the wheel in .deps/cutlass): the
# include tree and tools/util (packed strides). Only the *_sm90a.cu files use them (cmake/Layers.cmake).
set(SG_CUTLASS_ROOT ${CMAKE_SOURCE_DIR}/.deps/cutlass/cutlass_library/source)
find_path(CUTLASS_INCLUDE_DIR cutlass/cutlass.h HINTS ${SG_CUTLASS_ROOT}/include NO_DEFAULT_PATH REQUIRED
  DOC "cutlass/cutlass.h from PyPI nvidia-cutlass: run scripts/setup.sh")
find_path(CUTLASS_UTIL_INCLUDE_DIR cutlass/util/packed_stride.hpp HINTS ${SG_CUTLASS_ROOT}/tools/util/include
  NO_DEFAULT_PATH REQUIRED DOC "cutlass/util/packed_stride.hpp from PyPI nvidia-cutlass: run scripts/setup.sh")
add_library(sg_cutlass INTERFACE)
target_include_directories(sg_cutlass SYSTEM INTERFACE ${CUTLASS_INCLUDE_DIR} ${CUTLASS_UTIL_INCLUDE_DIR})

# NVML: the header from PyPI nvidia-nvml-dev-cu12 (scripts/setup.sh puts it in .deps/nvml; a toolkit that has
# nvml.h serves too); the library is the driver's libnvidia-ml.so.1, loaded at run time (src/bench/power_sampler.h),
# so binaries start on machines without a driver.
find_path(NVML_INCLUDE_DIR nvml.h HINTS ${CMAKE_SOURCE_DIR}/.deps/nvml/nvidia/nvml_dev/include
          ${CUDAToolkit_INCLUDE_DIRS} REQUIRED DOC "nvml.h from PyPI nvidia-nvml-dev-cu12: run scripts/setup.sh")
add_library(sg_nvml INTERFACE)
target_include_directories(sg_nvml SYSTEM INTERFACE ${NVML_INCLUDE_DIR})
target_link_libraries(sg_nvml INTERFACE ${CMAKE_DL_LIBS})

set(SG_WARNINGS -Wall -Wextra)

# NCCL: the header from the CUDA toolkit at build time; the library is loaded at run time (dlopen, see
# src/dist/nccl_library.h), so the binary starts without it and finds the machine's libnccl.so.2. The
# toolkit's library folder, when it has one, is the first place searched after the loader's own.
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/include
          /usr/local/cuda/include REQUIRED DOC "nccl.h (CUDA toolkit or the libnccl-dev package)")
find_library(NCCL_TOOLKIT_LIBRARY NAMES nccl libnccl.so.2 HINTS ${CUDAToolkit_LIBRARY_DIR} NO_DEFAULT_PATH)
set(SG_NCCL_TOOLKIT_LIBRARY_DIR "")
if(NCCL_TOOLKIT_LIBRARY)
  get_filename_component(SG_NCCL_TOOLKIT_LIBRARY_DIR ${NCCL_TOOLKIT_LIBRARY} DIRECTORY)
endif()
add_library(sg_nccl_headers INTERFACE)
target_include_directories(sg_nccl_headers SYSTEM INTERFACE ${NCCL_INCLUDE_DIR})

# Every dependency comes from a Debian package (scripts/install-deps.sh installs them), but
# LibTorch, which may be Debian's 1.13 or a 2.x of the user's (docs/libtorch.md).
include(MpifyFindTorch)
mpify_find_torch(REQUIRED)   # imported targets torch, torch_library, c10
find_package(Boost 1.74 REQUIRED COMPONENTS serialization)
find_package(fmt REQUIRED)
find_package(Threads REQUIRED)
# Which LibTorch generation this is: Torch_VERSION (TorchConfigVersion's) is "1.13.1" or
# "2.11.0+cu130"-like; MPIFY_TORCH_MAJOR picks what differs between them in the build.
string(REGEX MATCH "^[0-9]+\\.[0-9]+" MPIFY_TORCH_VERSION "${Torch_VERSION}")
if(NOT MPIFY_TORCH_VERSION)
  message(FATAL_ERROR "mpify: could not tell the version of the LibTorch found at ${Torch_DIR}")
endif()
if(MPIFY_TORCH_VERSION VERSION_LESS 1.13 OR (MPIFY_TORCH_VERSION VERSION_GREATER_EQUAL 2.0
                                              AND MPIFY_TORCH_VERSION VERSION_LESS 2.7))
  message(FATAL_ERROR "mpify builds against LibTorch 1.13 or 2.7 and newer; ${Torch_DIR} is LibTorch "
                      "${Torch_VERSION}. Point CMAKE_PREFIX_PATH (or Torch_DIR) at another LibTorch.")
endif()
string(REGEX MATCH "^[0-9]+" MPIFY_TORCH_MAJOR "${MPIFY_TORCH_VERSION}")
# The folder holding LibTorch's headers (<torch/...>, and for 2.x its own copies of fmt and
# perhaps of Gloo's headers).
list(GET TORCH_INCLUDE_DIRS 0 MPIFY_TORCH_INCLUDE_DIR)
# The C++ standard mpify's code, load_source's libraries and mpify-kernel's cells are
# compiled as: C++17, or what LibTorch demands when that is more (its headers refuse C++17
# from about 2.13 on), or what the project that builds mpify chose when that is more.
# LibTorch says so in ATen.h, which refuses an older __cplusplus with #error.
file(STRINGS "${MPIFY_TORCH_INCLUDE_DIR}/ATen/ATen.h" mpify_torch_standard REGEX "__cplusplus < 20[0-9][0-9]")
if(mpify_torch_standard MATCHES "__cplusplus < 20([0-9][0-9])")
  set(mpify_torch_standard ${CMAKE_MATCH_1})
else()
  get_target_property(mpify_torch_standard torch CXX_STANDARD)
endif()
set(MPIFY_CXX_STANDARD 17)
foreach(standard IN ITEMS "${mpify_torch_standard}" "${CMAKE_CXX_STANDARD}")
  if(standard MATCHES "^[0-9]+$" AND standard GREATER MPIFY_CXX_STANDARD)
    set(MPIFY_CXX_STANDARD ${standard})
  endif()
endforeach()
if(PROJECT_IS_TOP_LEVEL)
  set(CMAKE_CXX_STANDARD ${MPIFY_CXX_STANDARD})
endif()

if(MPIFY_TORCH_MAJOR EQUAL 1)
  # Debian's LibTorch 1.13 is linked against Debian's Gloo: the group's loop waker calls its
  # TCP device (src/ddp/backends/gloo/gloo_loop_waker.cpp), from its own library and headers.
  find_library(MPIFY_GLOO_LIBRARY gloo REQUIRED)
  set(MPIFY_GLOO_INCLUDE_DIR "")
else()
  # LibTorch 2.x carries Gloo inside libtorch_cpu.so: no second Gloo may be loaded beside it.
  # Its headers come with LibTorch when it has them; else mpify's declarations of the part it
  # uses stand in (src/ddp/backends/gloo_declarations/README.md).
  set(MPIFY_GLOO_LIBRARY "")
  if(EXISTS "${MPIFY_TORCH_INCLUDE_DIR}/gloo/context.h")
    set(MPIFY_GLOO_INCLUDE_DIR "")
  else()
    set(MPIFY_GLOO_INCLUDE_DIR "${PROJECT_SOURCE_DIR}/src/ddp/backends/gloo_declarations")
  endif()
endif()

# The LibTorch of PyPI's wheels links parts of a newer libstdc++ into libtorch.so and exports
# them: its std::filesystem functions among others, of which remove_all calls a function the
# system's libstdc++ lacks (a null pointer: a crash). A program that needs libtorch.so before
# libstdc++.so gets libtorch.so's copies, its own calls and every library's. What links
# mpify::torch names libstdc++ first (in MPIFY_TORCH_LINK_OPTIONS, its interface link options).
set(MPIFY_TORCH_LINK_OPTIONS "")
if(MPIFY_TORCH_MAJOR GREATER_EQUAL 2)
  list(APPEND MPIFY_TORCH_LINK_OPTIONS "LINKER:--push-state,--no-as-needed,-lstdc++,--pop-state")
endif()
# A wheel's CUDA LibTorch finds its NVIDIA libraries (NCCL, cuDNN, ...) in the nvidia/ wheels
# beside it, by its run path. The linker, checking what libtorch_cuda.so needs, looks in the
# folders of the link's own run path first, where the CUDA toolkit's (older) NCCL may be:
# the wheel's folders go first for that check (-rpath-link; nothing changes at run time).
file(GLOB mpify_nvidia_library_dirs LIST_DIRECTORIES true "${TORCH_INSTALL_PREFIX}/../nvidia/*/lib")
if(mpify_nvidia_library_dirs)
  list(JOIN mpify_nvidia_library_dirs ":" mpify_nvidia_library_dirs)
  list(APPEND MPIFY_TORCH_LINK_OPTIONS "LINKER:-rpath-link,${mpify_nvidia_library_dirs}")
endif()

# LibTorch 2.x ships its own fmt headers beside its others, so a file that includes both
# LibTorch and <fmt/...> gets LibTorch's fmt: mpify's code then uses fmt header-only
# (whichever fmt a file sees), never linking Debian's libfmt for another version's calls.
if(EXISTS "${MPIFY_TORCH_INCLUDE_DIR}/fmt/format.h")
  set(MPIFY_FMT fmt::fmt-header-only)
else()
  set(MPIFY_FMT fmt::fmt)
endif()

# libsodium: the random secrets and HMAC proofs of connect-back and of a remote group's store
# (common/secret_handshake.hpp).
find_package(PkgConfig REQUIRED)
pkg_check_modules(sodium REQUIRED IMPORTED_TARGET libsodium)
# elfutils' libdw: mpify-stacks reads a rank's threads (ptrace) and names each frame's
# function, file and line (src/forensics/stack_dump_main.cpp).
pkg_check_modules(libdw REQUIRED IMPORTED_TARGET libdw)

# Imported targets are visible only in the folder that found them, but mpify::mpify
# carries Torch's and Boost's into whatever links it: in a host project that adds mpify
# with add_subdirectory, that is another folder. Make them visible everywhere.
get_property(mpify_imported_targets DIRECTORY PROPERTY IMPORTED_TARGETS)
foreach(target IN LISTS mpify_imported_targets)
  get_target_property(already_global ${target} IMPORTED_GLOBAL)
  if(NOT already_global)
    set_target_properties(${target} PROPERTIES IMPORTED_GLOBAL TRUE)
  endif()
endforeach()

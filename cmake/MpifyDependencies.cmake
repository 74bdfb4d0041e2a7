# Every dependency comes from a Debian package (scripts/install-deps.sh installs them).
find_package(Torch REQUIRED)   # imported targets torch, torch_library, c10
find_package(Boost 1.74 REQUIRED COMPONENTS serialization)
find_package(fmt REQUIRED)
find_package(Threads REQUIRED)
# Gloo's own library (LibTorch's targets bring it only indirectly): the group's loop waker
# calls its TCP device (src/ddp/gloo_loop_waker.cpp).
find_library(MPIFY_GLOO_LIBRARY gloo REQUIRED)
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

# mpify_find_torch(<REQUIRED|QUIET> [HINT <folder of TorchConfig.cmake>]): find_package(Torch),
# with LibTorch's libraries taken from its own folder. Used by mpify's build and by the
# installed package (mpifyConfig.cmake), which hints at the LibTorch mpify was built with.
#
# LibTorch's TorchConfig.cmake looks for its libraries in the system's folders before its
# own: with a PyPI wheel's LibTorch (CMAKE_PREFIX_PATH = torch.utils.cmake_prefix_path, i.e.
# <torch>/share/cmake) on a machine that also has Debian's, it would take Debian's
# libtorch.so. Its own lib folder goes first (CMAKE_LIBRARY_PATH is searched before them).
macro(mpify_find_torch mode)
  cmake_parse_arguments(mpify_find_torch "" "HINT" "" ${ARGN})
  foreach(mpify_prefix IN LISTS Torch_DIR CMAKE_PREFIX_PATH mpify_find_torch_HINT)
    foreach(mpify_up IN ITEMS "../.." "../../..")
      get_filename_component(mpify_candidate "${mpify_prefix}/${mpify_up}/lib" ABSOLUTE)
      if(EXISTS "${mpify_candidate}/libtorch.so" AND NOT mpify_candidate IN_LIST CMAKE_LIBRARY_PATH)
        list(PREPEND CMAKE_LIBRARY_PATH "${mpify_candidate}")
      endif()
    endforeach()
  endforeach()
  # The hint, after the caller's own prefixes and before the system's: LibTorch's
  # TorchConfig.cmake then finds its Caffe2 targets beside it (a wheel's share/cmake), not a
  # system LibTorch's. Only for this search: the caller's CMAKE_PREFIX_PATH is left as it was.
  set(mpify_saved_prefix_path "${CMAKE_PREFIX_PATH}")
  if(mpify_find_torch_HINT)
    get_filename_component(mpify_hint_prefix "${mpify_find_torch_HINT}/.." ABSOLUTE)
    list(APPEND CMAKE_PREFIX_PATH "${mpify_hint_prefix}")
  endif()
  find_package(Torch ${mode})
  set(CMAKE_PREFIX_PATH "${mpify_saved_prefix_path}")
  if(TORCH_LIBRARY AND TORCH_INSTALL_PREFIX AND NOT TORCH_INSTALL_PREFIX MATCHES "^/usr/?$")
    get_filename_component(mpify_library_dir "${TORCH_LIBRARY}" DIRECTORY)
    get_filename_component(mpify_own_dir "${TORCH_INSTALL_PREFIX}/lib" ABSOLUTE)
    if(NOT mpify_library_dir STREQUAL mpify_own_dir)
      message(FATAL_ERROR "mpify: the LibTorch at ${TORCH_INSTALL_PREFIX} found its library as ${TORCH_LIBRARY}, "
                          "another LibTorch's. Give CMAKE_PREFIX_PATH as LibTorch's own folder (the one holding "
                          "lib/ and include/), or delete the cache entries TORCH_LIBRARY and c10_LIBRARY.")
    endif()
  endif()
endmacro()

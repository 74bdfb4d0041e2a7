# Run by `cmake --install` (kernel/CMakeLists.txt): writes the installed kernelspec with the
# folders of the prefix being installed to, which `--prefix` may choose only now.
# Given: MPIFY_KERNELSPEC_TEMPLATE, MPIFY_IMPLICIT_INCLUDES and the install folders
# MPIFY_BINDIR, MPIFY_DATADIR, MPIFY_INCLUDEDIR, MPIFY_LIBDIR (relative to the prefix, or absolute).
include(${CMAKE_CURRENT_LIST_DIR}/kernelspec_flags.cmake)
foreach(kind BINDIR DATADIR INCLUDEDIR LIBDIR)
  if(IS_ABSOLUTE "${MPIFY_${kind}}")
    set(full_${kind} "${MPIFY_${kind}}")
  else()
    set(full_${kind} "${CMAKE_INSTALL_PREFIX}/${MPIFY_${kind}}")
  endif()
endforeach()
set(MPIFY_KERNELSPEC_EXECUTABLE "${full_BINDIR}/mpify-kernel")
mpify_kernelspec_flags(MPIFY_KERNELSPEC_FLAGS "${MPIFY_IMPLICIT_INCLUDES}" "${full_DATADIR}/mpify/kernel/include"
                       "${full_INCLUDEDIR}" "-L${full_LIBDIR}")
set(kernelspec "$ENV{DESTDIR}${full_DATADIR}/jupyter/kernels/mpify-cpp17/kernel.json")
message(STATUS "Installing: ${kernelspec}")
configure_file("${MPIFY_KERNELSPEC_TEMPLATE}" "${kernelspec}" @ONLY)
list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${kernelspec}")

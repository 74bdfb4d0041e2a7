# cmake --install: headers, libmpify.so, libmpify_torch.so, mpify-worker, mpify-stacks and a CMake package so that
# find_package(mpify) gives the targets mpify::mpify (everything), mpify::core and mpify::torch.
# The package has two components: `core` (libmpify.so and mpify-worker; needs Boost only)
# and `torch` (libmpify_torch.so and the umbrella; needs LibTorch), each in its own export
# set, so that find_package(mpify COMPONENTS core) never looks for LibTorch.
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mpify DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${MPIFY_GENERATED_INCLUDE_DIR}/mpify/version.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mpify)
# The licence travels with the package (Apache-2.0: LICENSE and NOTICE).
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/NOTICE DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(TARGETS mpify_core mpify-worker mpify-stacks EXPORT mpifyCoreTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS mpify_torch mpify EXPORT mpifyTorchTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT mpifyCoreTargets NAMESPACE mpify:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mpify)
install(EXPORT mpifyTorchTargets NAMESPACE mpify:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mpify)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mpifyConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/mpifyConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mpify)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/mpifyConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mpifyConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/mpifyConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/MpifyFindTorch.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mpify)

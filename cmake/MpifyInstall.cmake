# cmake --install: headers, libmpify.so, libmpify_torch.so, libmpify_learner.so, mpify-worker,
# mpify-stacks and a CMake package so that
# find_package(mpify) gives the targets mpify::mpify (core and torch), mpify::core and
# mpify::torch, and with COMPONENTS learner mpify::learner.
# The package has three components: `core` (libmpify.so and mpify-worker; needs Boost only),
# `torch` (libmpify_torch.so and the umbrella; needs LibTorch) and `learner`
# (libmpify_learner.so; needs torch), each in its own export set, so that
# find_package(mpify COMPONENTS core) never looks for LibTorch.
include(CMakePackageConfigHelpers)

# (A build without the Learner installs none of its headers.)
set(mpify_header_exclusions)
if(NOT MPIFY_BUILD_LEARNER)
  set(mpify_header_exclusions PATTERN learner EXCLUDE)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mpify DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} ${mpify_header_exclusions})
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
if(MPIFY_BUILD_LEARNER)
  install(TARGETS mpify_learner EXPORT mpifyLearnerTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT mpifyLearnerTargets NAMESPACE mpify:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mpify)
endif()
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

include(CMakePackageConfigHelpers)

# libsluice.so and libsluice.a (sluice::sluice, sluice::sluice_static), the cuda module beside
# them in the library directory where the loader looks, and sluice::cuda where it was built.
set(_sluice_targets sluice sluice_static_archive)
if(SLUICE_HAVE_CUDA)
  list(APPEND _sluice_targets sluice_cuda)
endif()
install(TARGETS ${_sluice_targets} EXPORT sluiceTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(SLUICE_HAVE_CUDA)
  install(TARGETS sluice_cuda_module LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(DIRECTORY include/sluice DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${SLUICE_PLUGIN_ABI_HEADER} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sluice/ext)
install(EXPORT sluiceTargets NAMESPACE sluice:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sluice)

configure_package_config_file(cmake/sluiceConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/sluiceConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sluice
  PATH_VARS CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/sluiceConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/sluiceConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/sluiceConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sluice)
if(SLUICE_BUILD_TOOLS)
  install(TARGETS sluice_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

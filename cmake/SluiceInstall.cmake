include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS sluice EXPORT sluiceTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/sluice DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT sluiceTargets NAMESPACE sluice:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sluice)

configure_package_config_file(cmake/sluiceConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/sluiceConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sluice)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/sluiceConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/sluiceConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/sluiceConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sluice)
if(SLUICE_BUILD_TOOLS)
  install(TARGETS sluice_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

include(CMakePackageConfigHelpers)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/stowage DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The operator library's OpenCL C kernels (their shared headers are in include/stowage/opencl).
file(GLOB STOWAGE_OPERATOR_KERNELS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/backend/kernels/*.cl)
install(FILES ${STOWAGE_OPERATOR_KERNELS} DESTINATION ${CMAKE_INSTALL_DATADIR}/stowage/kernels)
# stowage::stowage_runtime runs bytecode files, stowage::stowage_compiler makes them
# (stowage::runtime and stowage::compiler for short, stowageConfig.cmake.in).
set(STOWAGE_INSTALLED_LIBRARIES stowage_support stowage_bytecode)
if(TARGET stowage_runtime)
  list(APPEND STOWAGE_INSTALLED_LIBRARIES stowage_runtime)
endif()
if(TARGET stowage_compiler)
  list(APPEND STOWAGE_INSTALLED_LIBRARIES stowage_compiler)
endif()
install(TARGETS ${STOWAGE_INSTALLED_LIBRARIES} EXPORT stowageTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET vm-run)
  install(TARGETS vm-run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET stowc)
  install(TARGETS stowc RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(EXPORT stowageTargets NAMESPACE stowage:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/stowage)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/stowageConfig.cmake.in
  ${PROJECT_BINARY_DIR}/stowageConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/stowage)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/stowageConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/stowageConfig.cmake ${PROJECT_BINARY_DIR}/stowageConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/stowage)

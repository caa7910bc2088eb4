# Writes the CMake package and pkg-config files of an installed railwatch
# into PREFIX (`cargo xtask install --prefix DIR` runs it after copying the
# headers and libraries):
#   cmake -DPREFIX=DIR -DVERSION=0.2.0 -DSONAME=librailwatch.so.0.2 \
#         -DCMAKE_SIZEOF_VOID_P=8 -P crates/ffi/dist/configure.cmake
# CMake's own helpers write the version check (SameMinorVersion while the
# C API is 0.x, SameMajorVersion from 1.0) and make the package
# relocatable (its paths relative to where railwatchConfig.cmake is).
cmake_minimum_required(VERSION 3.18)
include(CMakePackageConfigHelpers)

foreach(var PREFIX VERSION SONAME)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "configure.cmake: -D${var}=... is required")
  endif()
endforeach()

set(INCLUDE_DIR include/railwatch)
set(LIB_DIR lib)
set(CONFIG_DIR ${LIB_DIR}/cmake/railwatch)

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/railwatchConfig.cmake.in ${PREFIX}/${CONFIG_DIR}/railwatchConfig.cmake
  INSTALL_DESTINATION ${CONFIG_DIR}
  INSTALL_PREFIX ${PREFIX}
  PATH_VARS INCLUDE_DIR LIB_DIR)

if(VERSION MATCHES "^0\\.")
  set(compatibility SameMinorVersion)
else()
  set(compatibility SameMajorVersion)
endif()
write_basic_package_version_file(
  ${PREFIX}/${CONFIG_DIR}/railwatchConfigVersion.cmake VERSION ${VERSION} COMPATIBILITY ${compatibility})

configure_file(${CMAKE_CURRENT_LIST_DIR}/railwatch.pc.in ${PREFIX}/${LIB_DIR}/pkgconfig/railwatch.pc @ONLY)

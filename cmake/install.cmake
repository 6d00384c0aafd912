# cmake --install: the static library with its public headers, the CLI, a CMake package config
# (find_package(vlattice) -> vlattice::vlattice) and a pkg-config file. Included from the top-level
# CMakeLists.txt once the targets exist.
include(CMakePackageConfigHelpers)

set(VLATTICE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/vlattice)

install(TARGETS vlattice EXPORT vlatticeTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS vlattice_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(VLATTICE_HAVE_MPI)
  # Where the CLI looks for it: lib/vlattice beside the bin/ it runs from.
  install(TARGETS vlattice_mpi LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/vlattice)
endif()
install(DIRECTORY include/vlattice DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
install(EXPORT vlatticeTargets NAMESPACE vlattice:: DESTINATION ${VLATTICE_CMAKE_DIR})

configure_package_config_file(cmake/vlatticeConfig.cmake.in ${PROJECT_BINARY_DIR}/vlatticeConfig.cmake
  INSTALL_DESTINATION ${VLATTICE_CMAKE_DIR})
# 0.x releases make no promise between minor versions.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/vlatticeConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/vlatticeConfig.cmake ${PROJECT_BINARY_DIR}/vlatticeConfigVersion.cmake
  DESTINATION ${VLATTICE_CMAKE_DIR})

# pkg-config cannot find a static archive's dependencies on its own, so Libs names every library the
# build linked, as the build resolved them. The prefix is found from the .pc file's own place, so the
# file stays right under `cmake --install --prefix`.
file(RELATIVE_PATH VLATTICE_PC_PREFIX "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
string(REGEX REPLACE "/$" "" VLATTICE_PC_PREFIX "${VLATTICE_PC_PREFIX}")
set(VLATTICE_PC_PREFIX "\${pcfiledir}/${VLATTICE_PC_PREFIX}")
get_target_property(VLATTICE_JSON_INCLUDES nlohmann_json::nlohmann_json INTERFACE_INCLUDE_DIRECTORIES)
set(VLATTICE_PC_CFLAGS ${OpenMP_CXX_FLAGS})
foreach(dir IN LISTS VLATTICE_JSON_INCLUDES)
  if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
    list(APPEND VLATTICE_PC_CFLAGS "-I${dir}")
  endif()
endforeach()
set(VLATTICE_PC_LIBS ${OPENBLAS_LIBRARY} ${HDF5_C_LIBRARIES} ${XXHASH_LIBRARY})
if(VLATTICE_HAVE_CUDA)
  # What CUDA::cudart_static brings with it (FindCUDAToolkit's cudart_static_deps).
  list(APPEND VLATTICE_PC_LIBS ${CUDA_cudart_static_LIBRARY} -ldl -lrt -pthread)
endif()
list(APPEND VLATTICE_PC_LIBS ${OpenMP_CXX_FLAGS})
list(JOIN VLATTICE_PC_CFLAGS " " VLATTICE_PC_CFLAGS)
list(JOIN VLATTICE_PC_LIBS " " VLATTICE_PC_LIBS)
configure_file(cmake/vlattice.pc.in ${PROJECT_BINARY_DIR}/vlattice.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/vlattice.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

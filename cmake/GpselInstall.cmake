# Packaging (issue "seams", item 7): installs gpsel::core and, when the service layers are built,
# gpsel::client with what it links (gpsel::bridge, gpsel::proto), their headers, a CMake package
# (gpselConfig.cmake, gpselConfigVersion.cmake, gpselTargets.cmake), a pkg-config file for core
# (gpsel.pc) and the gpsel and gpsel-server binaries. tests/packaging/run.sh installs a build tree
# and builds tests/packaging/consumer/ against it. Included from the top CMakeLists.txt after
# every folder is added.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(GPSEL_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/gpsel)
# Headers keep the paths the sources use: "gpsel/core/fit.h" below include/ (the INSTALL_INTERFACE
# of gpsel_include_root), protoc's "gpsel/v1/types.pb.h" below include/gpsel/proto/gen (that of
# gpsel_proto). core/internal/ is not installed: nothing outside core includes it.
set(GPSEL_INSTALL_HEADERDIR ${CMAKE_INSTALL_INCLUDEDIR}/gpsel)

set(gpsel_exported gpsel_core)
set(gpsel_header_folders core)
if(TARGET gpsel_client)
  list(APPEND gpsel_exported gpsel_proto gpsel_bridge gpsel_client)
  list(APPEND gpsel_header_folders proto/bridge client)
endif()
foreach(target IN LISTS gpsel_exported)
  string(REGEX REPLACE "^gpsel_" "" name ${target})
  # gpsel::core, not gpsel::gpsel_core
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
endforeach()

# The top CMakeLists.txt compiles everything with -march=x86-64-v3 when GPSEL_CPU_LEVEL allows,
# and Eigen follows it: with AVX its heap alignment is 32 bytes and it allocates with its own
# offset-storing aligned malloc instead of plain malloc (Eigen/src/Core/util/Memory.h). A consumer
# compiled without the flag would free the Eigen vectors of core's results (core/score.h,
# core/predict.h) with the other allocator, so installed consumers get the same level.
if(gpsel_use_v3)
  set_property(TARGET gpsel_core APPEND PROPERTY INTERFACE_COMPILE_OPTIONS
    $<INSTALL_INTERFACE:-march=x86-64-v3>)
  set(GPSEL_PC_ARCH_CFLAGS "-march=x86-64-v3")
else()
  set(GPSEL_PC_ARCH_CFLAGS "")
endif()

install(TARGETS ${gpsel_exported} EXPORT gpselTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(folder IN LISTS gpsel_header_folders)
  # The folder's own headers only: core/internal/ and client/{cli,report}/ stay in the tree.
  file(GLOB headers ${PROJECT_SOURCE_DIR}/${folder}/*.h)
  install(FILES ${headers} DESTINATION ${GPSEL_INSTALL_HEADERDIR}/${folder})
endforeach()
if(TARGET gpsel_proto)
  # protoc's headers (gpsel/v1, google/rpc, grpc/health/v1), generated in proto/CMakeLists.txt.
  install(DIRECTORY ${PROJECT_BINARY_DIR}/proto/gen/ DESTINATION ${GPSEL_INSTALL_HEADERDIR}/proto/gen
    FILES_MATCHING PATTERN "*.h")
endif()

install(EXPORT gpselTargets NAMESPACE gpsel:: DESTINATION ${GPSEL_INSTALL_CMAKEDIR})
# The build tree as a package too (CMAKE_PREFIX_PATH=build), for trying a consumer without
# installing.
export(EXPORT gpselTargets NAMESPACE gpsel:: FILE ${PROJECT_BINARY_DIR}/gpselTargets.cmake)

# Values gpselConfig.cmake.in needs: whether gRPC/protobuf targets are part of the package, and
# the libraries linked by full path (top CMakeLists.txt, core/CMakeLists.txt).
if(TARGET gpsel_client)
  set(GPSEL_PACKAGE_HAS_CLIENT ON)
else()
  set(GPSEL_PACKAGE_HAS_CLIENT OFF)
endif()
if(NOT GPSEL_MVEC_LIBRARY)
  set(GPSEL_MVEC_LIBRARY "")
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gpselConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gpselConfig.cmake
  INSTALL_DESTINATION ${GPSEL_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gpselConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gpselConfig.cmake ${PROJECT_BINARY_DIR}/gpselConfigVersion.cmake
  DESTINATION ${GPSEL_INSTALL_CMAKEDIR})

# pkg-config (core only: the client's gRPC dependencies are CMake targets without one .pc file
# that matches them). The prefix is found from the .pc file's own place so that
# `cmake --install build --prefix DIR` gives a usable file whatever prefix was configured.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(GPSEL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  set(GPSEL_PC_PREFIX "\${pcfiledir}")
  string(REPLACE "/" ";" parts "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
  foreach(part IN LISTS parts)
    string(APPEND GPSEL_PC_PREFIX "/..")
  endforeach()
endif()
# OpenBLAS and libmvec by full path, as gpsel_core links them, plus an rpath to the pthread
# OpenBLAS's directory: the library's soname (libopenblas.so.0) alone would resolve to whatever
# update-alternatives selects, possibly Debian's serial build that is not thread-safe (see the
# comment at GPSEL_BLAS_LIBRARY in the top CMakeLists.txt).
get_filename_component(GPSEL_BLAS_DIR ${GPSEL_BLAS_LIBRARY} DIRECTORY)
set(GPSEL_PC_LIBS_EXTRA "${GPSEL_BLAS_LIBRARY} -Wl,-rpath,${GPSEL_BLAS_DIR}")
if(GPSEL_MVEC_LIBRARY)
  string(APPEND GPSEL_PC_LIBS_EXTRA " ${GPSEL_MVEC_LIBRARY}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/gpsel.pc.in ${PROJECT_BINARY_DIR}/gpsel.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/gpsel.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The binaries. Their install rpath keeps the link directories outside the system ones, i.e. the
# pthread OpenBLAS's, for the reason above (CMake drops the build rpath on install otherwise).
foreach(binary gpsel gpsel-server)
  if(TARGET ${binary})
    set_target_properties(${binary} PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
    install(TARGETS ${binary} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

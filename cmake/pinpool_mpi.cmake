# cmake/pinpool_mpi.cmake -- libpinpool_mpi (target pinpool::mpi, header
# include/pinpool_mpi.h, pkg-config pinpool-mpi): pinpool across ranks on
# MPI.  Built only when CMake finds MPI for C (Debian: libopenmpi-dev); the
# core library never depends on MPI.
find_package(MPI COMPONENTS C QUIET)
if(NOT MPI_C_FOUND)
    message(STATUS "MPI not found: libpinpool_mpi and its tests are not built "
                   "(Debian: libopenmpi-dev openmpi-bin)")
    set(PINPOOL_HAVE_MPI OFF)
    return()
endif()
set(PINPOOL_HAVE_MPI ON)

# From the bottom up: each file refers only to the files before it
# (src/mpi/layer.h; the test layout.calls.mpi).
set(PINPOOL_MPI_SOURCES
    src/mpi/wire.c
    src/mpi/wset.c
    src/mpi/perthread.c
    src/mpi/transport_mpi.c
    src/mpi/ht.c
    src/mpi/common.c
    src/mpi/typed.c
    src/mpi/loader.c
    src/mpi/home.c
    src/mpi/proxy.c
    src/mpi/remote.c
    src/mpi/owners.c
    src/mpi/progress.c
    src/mpi/layer.c)
set(PINPOOL_MPI_HEADERS
    src/mpi/layer.h
    src/mpi/perthread.h
    src/mpi/wset.h
    src/mpi/wire.h
    src/mpi/transport.h
    include/pinpool_mpi.h)

add_library(pinpool_mpi_objects OBJECT ${PINPOOL_MPI_SOURCES} ${PINPOOL_MPI_HEADERS})
pinpool_library_settings(pinpool_mpi_objects)
target_compile_definitions(pinpool_mpi_objects PRIVATE PP__WITH_MPI=1)
target_link_libraries(pinpool_mpi_objects PRIVATE MPI::MPI_C)

add_library(pinpool_mpi SHARED $<TARGET_OBJECTS:pinpool_mpi_objects>)
add_library(pinpool::mpi ALIAS pinpool_mpi)
set_target_properties(pinpool_mpi PROPERTIES
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}
    EXPORT_NAME mpi
    PUBLIC_HEADER "include/pinpool_mpi.h")
target_include_directories(pinpool_mpi PUBLIC ${_pp_include_dirs})
target_link_libraries(pinpool_mpi PUBLIC pinpool MPI::MPI_C
    PRIVATE PkgConfig::CK Threads::Threads)

# The layer linked statically with the core, for the benchmarks (bench/):
# the product's objects, as libpinpool_mpi.so has them.  Never installed.
add_library(pinpool_mpi_static STATIC $<TARGET_OBJECTS:pinpool_mpi_objects>)
target_include_directories(pinpool_mpi_static PUBLIC ${_pp_include_dirs})
target_link_libraries(pinpool_mpi_static PUBLIC pinpool_static MPI::MPI_C PkgConfig::CK)

# For the tests: the testing variant of the layer (PP__TESTING=1: its test
# points, layer.h), linked with the core's (pinpool_testing), plus the
# in-process transport, which is test machinery and lives with the tests
# (tests/mpi/support/).  The MPI tests and mpi_torture link it.
if(TARGET pinpool_testing)
    set(PINPOOL_MPI_INPROC tests/mpi/support/transport_inproc.c
        tests/mpi/support/transport_inproc.h)
    add_library(pinpool_mpi_testlib STATIC ${PINPOOL_MPI_SOURCES} ${PINPOOL_MPI_HEADERS}
        ${PINPOOL_MPI_INPROC})
    pinpool_library_settings(pinpool_mpi_testlib)
    target_compile_definitions(pinpool_mpi_testlib PRIVATE PP__WITH_MPI=1)
    target_include_directories(pinpool_mpi_testlib PUBLIC
        ${CMAKE_CURRENT_SOURCE_DIR}/src/mpi ${CMAKE_CURRENT_SOURCE_DIR}/tests/mpi/support)
    target_link_libraries(pinpool_mpi_testlib PUBLIC pinpool_testing MPI::MPI_C PkgConfig::CK)
endif()

install(TARGETS pinpool_mpi
    EXPORT pinpoolTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# pinpool-mpi.pc: configured with pinpool.pc (CMakeLists.txt).

# Packaging, included at the end of the root CMakeLists.txt once every target exists:
#   - a pkg-config file per built library, for builds without CMake: idem.pc (idem::runtime), and
#     idem-sqlite.pc, idem-postgres.pc, idem-redis.pc, idem-http.pc for the stores that were built
#     (each requires idem.pc). Header-only idem::asio and idem::beast have none: Boost ships no
#     pkg-config file, their users add Boost's include path themselves. The files locate the tree
#     from ${pcfiledir}, so an unpacked or moved tree works as installed;
#   - `cpack -G DEB` in the build tree of a top-level build: libidem-dev, the install tree (headers, static libraries,
#     CMake package, pkg-config files, idem-annotate and idem-admin when built), its Depends computed from the
#     parts built (idem_package_part below: the one list of what each part needs);
#   - idem_installable, a target that builds everything `cmake --install` and cpack copy, for the
#     tests that install (tests/kit, tests/package).

set(IDEM_DEBIAN_DEPENDS "")
set(IDEM_DEBIAN_SUGGESTS "")

# pkg-config files sit in <libdir>/pkgconfig; the prefix is found from there.
file(RELATIVE_PATH idem_pc_to_prefix "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
string(REGEX REPLACE "/$" "" idem_pc_to_prefix "${idem_pc_to_prefix}")

# idem_package_part(<target> [PC <file name> REQUIRES <pkg-config modules>] [DEBIAN <packages>]
#                   [SUGGESTS <packages>])
# For a target that was built: a pkg-config file linking its library after the modules it
# requires, and the Debian packages a user of the installed part needs.
function(idem_package_part target)
  cmake_parse_arguments(arg "" "PC" "REQUIRES;DEBIAN;SUGGESTS" ${ARGN})
  if(NOT TARGET ${target})
    return()
  endif()
  set(IDEM_DEBIAN_DEPENDS ${IDEM_DEBIAN_DEPENDS} ${arg_DEBIAN} PARENT_SCOPE)
  set(IDEM_DEBIAN_SUGGESTS ${IDEM_DEBIAN_SUGGESTS} ${arg_SUGGESTS} PARENT_SCOPE)
  if(NOT arg_PC)
    return()
  endif()
  get_target_property(library ${target} OUTPUT_NAME)
  string(REPLACE ";" " " requires "${arg_REQUIRES}")
  # The runtime's static library needs the thread library; the stores get it through idem.pc.
  set(threads "")
  if(target STREQUAL "idem_runtime")
    set(threads " -pthread")
  endif()
  set(content "prefix=\${pcfiledir}/${idem_pc_to_prefix}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}
includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}

Name: ${arg_PC}
Description: ${PROJECT_DESCRIPTION} (${target}; C++20)
Version: ${PROJECT_VERSION}
Requires: ${requires}
Libs: -L\${libdir} -l${library}${threads}
Cflags: -I\${includedir}
")
  file(GENERATE OUTPUT "${PROJECT_BINARY_DIR}/pkgconfig/${arg_PC}.pc" CONTENT "${content}")
  install(FILES "${PROJECT_BINARY_DIR}/pkgconfig/${arg_PC}.pc" DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()

# Every library is static, so a module's private dependencies are public to its users.
idem_package_part(idem_runtime PC idem REQUIRES nlohmann_json fmt libcrypto simdjson
                  DEBIAN libfmt-dev nlohmann-json3-dev libssl-dev libsimdjson-dev)
idem_package_part(idem_sqlite PC idem-sqlite REQUIRES idem sqlite3 DEBIAN libsqlite3-dev)
idem_package_part(idem_postgres PC idem-postgres REQUIRES idem libpq DEBIAN libpq-dev)
idem_package_part(idem_redis PC idem-redis REQUIRES idem hiredis libcrypto DEBIAN libhiredis-dev)
idem_package_part(idem_http PC idem-http REQUIRES idem cpp-httplib DEBIAN libcpp-httplib-dev)
idem_package_part(idem_asio DEBIAN libboost1.81-dev)
# idem-annotate: Clang's and LLVM's shared libraries, Clang's builtin headers (its resource
# directory) and clang++ itself, which it asks for the system include paths.
idem_package_part(idem_annotate DEBIAN libclang-cpp19 libllvm19 libclang-common-19-dev clang-19)
if(IDEM_WITH_TESTING)
  idem_package_part(idem_testing SUGGESTS catch2)
endif()

# idem_installable: the build targets defined under runtime/, admin/, annotator/ and testing/, those of
# them that this build has (interface libraries have nothing to build).
function(idem_build_targets_under dir out)
  set(found "")
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      list(APPEND found ${target})
    endif()
  endforeach()
  get_property(subdirectories DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(subdirectory ${subdirectories})
    idem_build_targets_under("${subdirectory}" more)
    list(APPEND found ${more})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()
set(idem_installed_targets "")
get_property(idem_top_directories DIRECTORY "${PROJECT_SOURCE_DIR}" PROPERTY SUBDIRECTORIES)
foreach(dir runtime admin annotator testing)
  if("${PROJECT_SOURCE_DIR}/${dir}" IN_LIST idem_top_directories)
    idem_build_targets_under("${PROJECT_SOURCE_DIR}/${dir}" targets)
    list(APPEND idem_installed_targets ${targets})
  endif()
endforeach()
add_custom_target(idem_installable)
add_dependencies(idem_installable ${idem_installed_targets})

list(REMOVE_DUPLICATES IDEM_DEBIAN_DEPENDS)
list(JOIN IDEM_DEBIAN_DEPENDS ", " CPACK_DEBIAN_PACKAGE_DEPENDS)
list(JOIN IDEM_DEBIAN_SUGGESTS ", " CPACK_DEBIAN_PACKAGE_SUGGESTS)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME libidem-dev)
set(CPACK_PACKAGE_VENDOR idem)
set(CPACK_PACKAGE_CONTACT "idem maintainers <idem@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
# Embedded, idem leaves packaging to the parent project.
if(idem_IS_TOP_LEVEL)
  include(CPack)
endif()

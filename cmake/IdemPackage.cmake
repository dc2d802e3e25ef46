# Packaging, included at the end of the root CMakeLists.txt once every target exists:
#   - idem_installable, a target that builds everything `cmake --install` copies, for the tests
#     that install (tests/kit).

# idem_installable: the build targets defined under runtime/, annotator/ and testing/, those of
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
foreach(dir runtime annotator testing)
  if("${PROJECT_SOURCE_DIR}/${dir}" IN_LIST idem_top_directories)
    idem_build_targets_under("${PROJECT_SOURCE_DIR}/${dir}" targets)
    list(APPEND idem_installed_targets ${targets})
  endif()
endforeach()
add_custom_target(idem_installable)
add_dependencies(idem_installable ${idem_installed_targets})

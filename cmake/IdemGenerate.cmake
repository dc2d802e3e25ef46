# IdemGenerate.cmake — wires idem-annotate into a target.
#
#   idem_generate(<target> HEADERS <header>... [OUTPUT_DIR <dir>] [NO_KEY_CHECK])
#
# For each header, one generator command (so that one header's change regenerates only its own
# output) produces, in OUTPUT_DIR (default: <binary dir>/idem_generated/<target>):
#   <stem>.idem.hpp   idem::policy<&C::m> specialisations and idem::guarded<C> classes
#   <stem>.idem.cpp   the registration of every policy (added to <target>'s sources)
#   <stem>.idem.json  the manifest: every annotated function, its scope, options and location
# The command reads the target's include directories, compile definitions, compile options and
# CMAKE_CXX_FLAGS (with the build type's), as the compiler sees the header, and a DEPFILE
# lists every file the header includes, so that a no-op rebuild runs nothing and touching an
# included header regenerates exactly the outputs that depend on it. Every misconfigured
# annotation fails the build with a Clang-style diagnostic pointing at the attribute.
#
# The target must link idem::runtime. OUTPUT_DIR is added to its include path, so the code
# includes "<stem>.idem.hpp"; headers of one name in one call (a/api.hpp, b/api.hpp) are
# generated under their directory relative to the current source directory ("a/api.idem.hpp",
# included as such). The unknown attribute is silenced per compiler:
# -Wno-attributes=idem:: on GCC, -Wno-unknown-attributes on Clang.
include_guard(GLOBAL)

# Where <idem/invoke.hpp> is, for the generator's Sema checks: set by idemConfig.cmake in an
# install tree, or by idem's own build.
if(NOT DEFINED IDEM_ANNOTATE_INCLUDE_DIR)
  get_filename_component(IDEM_ANNOTATE_INCLUDE_DIR "${CMAKE_CURRENT_LIST_DIR}/../include" ABSOLUTE)
endif()
set_property(GLOBAL PROPERTY IDEM_ANNOTATE_INCLUDE_DIR "${IDEM_ANNOTATE_INCLUDE_DIR}")

function(idem_generate target)
  cmake_parse_arguments(arg "NO_KEY_CHECK" "OUTPUT_DIR" "HEADERS" ${ARGN})
  if(NOT TARGET ${target})
    message(FATAL_ERROR "idem_generate: no target named '${target}'")
  endif()
  if(NOT arg_HEADERS)
    message(FATAL_ERROR "idem_generate(${target}): give at least one header after HEADERS")
  endif()
  if(NOT TARGET idem::annotate)
    message(FATAL_ERROR "idem_generate(${target}): idem::annotate is not available "
                        "(configure idem with IDEM_BUILD_ANNOTATOR=ON, or find_package(idem) from an install tree)")
  endif()
  set(out_dir "${arg_OUTPUT_DIR}")
  if(NOT out_dir)
    set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/idem_generated/${target}")
  endif()

  # The compile context of the target, as the generator must see the header.
  set(includes "$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>")
  set(defines "$<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>")
  set(standard "$<TARGET_PROPERTY:${target},CXX_STANDARD>")
  # The options the compiler gets too, so that a -D among them (or any option that changes what the
  # header means) reaches the generator: the target's compile options (its own and those of what it
  # links) and CMAKE_CXX_FLAGS with the flags of the build type. Clang's driver parses them; one it
  # does not know fails the generator with Clang's "unknown argument", never silently.
  set(compile_options "$<TARGET_PROPERTY:${target},COMPILE_OPTIONS>")
  set(flags "${CMAKE_CXX_FLAGS}")
  if(CMAKE_BUILD_TYPE)
    string(TOUPPER "${CMAKE_BUILD_TYPE}" build_type)
    string(APPEND flags " ${CMAKE_CXX_FLAGS_${build_type}}")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  get_property(idem_include GLOBAL PROPERTY IDEM_ANNOTATE_INCLUDE_DIR)
  set(options "--idem-include=${idem_include}")
  if(arg_NO_KEY_CHECK)
    list(APPEND options --no-key-check)
  endif()

  # Headers of one name (a/api.hpp, b/api.hpp) are generated under their directories relative to
  # the source directory (a/api.idem.hpp, b/api.idem.hpp); every other one as <stem>.idem.hpp.
  set(stems "")
  foreach(header IN LISTS arg_HEADERS)
    get_filename_component(stem "${header}" NAME_WE)
    list(APPEND stems "${stem}")
  endforeach()
  foreach(header IN LISTS arg_HEADERS)
    get_filename_component(source "${header}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    get_filename_component(stem "${header}" NAME_WE)
    set(same_stem "${stems}")
    list(FILTER same_stem INCLUDE REGEX "^${stem}$")
    list(LENGTH same_stem same_stem_count)
    set(name "${stem}")
    if(same_stem_count GREATER 1)
      get_filename_component(directory "${source}" DIRECTORY)
      file(RELATIVE_PATH relative "${CMAKE_CURRENT_SOURCE_DIR}" "${directory}")
      if(relative MATCHES "^\\.\\.")
        message(FATAL_ERROR "idem_generate(${target}): two headers are named ${stem}; the one outside "
                            "${CMAKE_CURRENT_SOURCE_DIR} (${header}) needs another name or its own idem_generate call")
      endif()
      if(NOT relative STREQUAL "")
        set(name "${relative}/${stem}")
      endif()
    endif()
    set(generated_header "${out_dir}/${name}.idem.hpp")
    set(generated_source "${out_dir}/${name}.idem.cpp")
    set(manifest "${out_dir}/${name}.idem.json")
    set(depfile "${out_dir}/${name}.idem.d")
    add_custom_command(
      OUTPUT "${generated_header}" "${generated_source}" "${manifest}"
      COMMAND idem::annotate
              "--output-header=${generated_header}" "--output-source=${generated_source}"
              "--manifest=${manifest}" "--depfile=${depfile}" "--include-as=${source}"
              ${options} "${source}" --
              "$<$<BOOL:${includes}>:-I$<JOIN:${includes},;-I>>"
              "$<$<BOOL:${defines}>:-D$<JOIN:${defines},;-D>>"
              ${flags} "${compile_options}"
              "-std=c++$<IF:$<BOOL:${standard}>,${standard},20>"
      DEPENDS "${source}" idem::annotate
      DEPFILE "${depfile}"
      COMMENT "idem-annotate ${header}"
      COMMAND_EXPAND_LISTS
      VERBATIM)
    target_sources(${target} PRIVATE "${generated_source}" "${generated_header}")
  endforeach()

  target_include_directories(${target} PRIVATE "${out_dir}")
  target_compile_options(${target} PRIVATE
    "$<$<CXX_COMPILER_ID:GNU>:-Wno-attributes=idem::>"
    "$<$<CXX_COMPILER_ID:Clang>:-Wno-unknown-attributes>")
endfunction()

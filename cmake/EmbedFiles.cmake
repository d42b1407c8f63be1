# meshtune_embed_files(OUTPUT <file.cc> NAMESPACE <ns> FUNCTION <fn> FILES ...)
#
# Generates a C++ source that defines
#   const std::vector<meshtune::EmbeddedFile>& <ns>::<fn>();
# returning {relative path, contents} for each file, so presets are built into
# the binary. The generated file is rebuilt whenever an input changes.
set(MESHTUNE_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed_files_script.cmake)

function(meshtune_embed_files)
  cmake_parse_arguments(ARG "" "OUTPUT;NAMESPACE;FUNCTION;BASE_DIR" "FILES" ${ARGN})
  string(REPLACE ";" "|" files_arg "${ARG_FILES}")
  add_custom_command(
    OUTPUT ${ARG_OUTPUT}
    COMMAND ${CMAKE_COMMAND}
            -DOUTPUT=${ARG_OUTPUT} -DNAMESPACE=${ARG_NAMESPACE}
            -DFUNCTION=${ARG_FUNCTION} -DBASE_DIR=${ARG_BASE_DIR}
            "-DFILES=${files_arg}"
            -P ${MESHTUNE_EMBED_SCRIPT}
    DEPENDS ${ARG_FILES} ${MESHTUNE_EMBED_SCRIPT}
    COMMENT "Embedding ${ARG_FUNCTION} files"
    VERBATIM)
endfunction()

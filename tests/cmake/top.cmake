# xtel top: the unit tests link its view (tools/xtel: the numbers, the rates and the frame's
# text); the integration tests run the program over xfer_demo's node files, with --once and
# under tmux (Debian package tmux: skipped, saying so, when it was not found). Built here too
# when the tools are off.
if(NOT TARGET xtel_top_view)
    add_subdirectory(${PROJECT_SOURCE_DIR}/tools/xtel ${PROJECT_BINARY_DIR}/tools/xtel)
endif()
target_link_libraries(xtel_unit_tests PRIVATE xtel_top_view)

find_program(XTEL_TMUX tmux)
# The quickstart (XTEL_CURL) runs xtel top too.
xtel_integration_tests_name(xtel_top_used XTEL_TOP XTEL_CURL)
if(TARGET xtel_integration_tests AND xtel_top_used)
    add_dependencies(xtel_integration_tests xtel_cli)
    target_compile_definitions(xtel_integration_tests PRIVATE
        XTEL_TOP="$<TARGET_FILE:xtel_cli>"
        XTEL_TMUX="$<$<BOOL:${XTEL_TMUX}>:${XTEL_TMUX}>")
endif()

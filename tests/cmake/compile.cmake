# Tests that run the compiler: what must not compile (an exporter hook of the wrong form) and
# what a header must not pull in (xtel/agent/agent.hpp: no UCX backend, no exporter). They compile
# with -fsyntax-only, so they take a second each and build nothing.
set(XTEL_COMPILE_FLAGS -std=c++20 -fsyntax-only -I${PROJECT_SOURCE_DIR}/include)

add_test(NAME "compile: an exporter with every hook in its documented form compiles"
    COMMAND ${CMAKE_CXX_COMPILER} ${XTEL_COMPILE_FLAGS}
        ${CMAKE_CURRENT_SOURCE_DIR}/compile/exporter_hook.cpp)

# hook, then the message's words that name it and the form expected.
set(XTEL_WRONG_HOOKS
    "ON_FLUSH_END|on_flush_end must be callable as `void on_flush_end\\(\\)`"
    "ON_STOP|on_stop must be callable as `void on_stop\\(\\)`"
    "DISABLED|disabled must be `bool disabled\\(\\) const noexcept`"
    "EVENTS_LOST|events_lost must be `std::uint64_t events_lost\\(\\) const noexcept`"
    "EXPORT_TRANSFERS|export_transfers must be callable as `void export_transfers"
    "NAME|name must be `static constexpr std::string_view name`"
    "METRIC_STATE|must be constructible from `const metric_state_context<M>&` and not from"
    "SNAPSHOT_EXPORT_BATCH|must declare neither export_batch nor export_transfers"
    "EXPORT_SPANS|must have `bool export_spans\\(std::span<const S::span_type>\\)`")
foreach(entry IN LISTS XTEL_WRONG_HOOKS)
    string(FIND "${entry}" "|" bar)
    string(SUBSTRING "${entry}" 0 ${bar} hook)
    math(EXPR after "${bar} + 1")
    string(SUBSTRING "${entry}" ${after} -1 message)
    string(TOLOWER "${hook}" hook_name)
    set(test_name "compile: an exporter hook ${hook_name} of the wrong form is a compile error")
    add_test(NAME "${test_name}"
        COMMAND ${CMAKE_CXX_COMPILER} ${XTEL_COMPILE_FLAGS} -DXTEL_WRONG_HOOK
            -DXTEL_WRONG_${hook} ${CMAKE_CURRENT_SOURCE_DIR}/compile/exporter_hook.cpp)
    # Passes only when the compiler prints the hook's message (so it failed, for that reason).
    set_tests_properties("${test_name}" PROPERTIES PASS_REGULAR_EXPRESSION "${message}")
endforeach()

add_test(NAME "compile: a metrics builder with setup in its documented form compiles"
    COMMAND ${CMAKE_CXX_COMPILER} ${XTEL_COMPILE_FLAGS}
        ${CMAKE_CURRENT_SOURCE_DIR}/compile/builder_hook.cpp)
add_test(NAME "compile: a metrics builder setup of the wrong form is a compile error"
    COMMAND ${CMAKE_CXX_COMPILER} ${XTEL_COMPILE_FLAGS} -DXTEL_WRONG_HOOK
        ${CMAKE_CURRENT_SOURCE_DIR}/compile/builder_hook.cpp)
set_tests_properties("compile: a metrics builder setup of the wrong form is a compile error"
    PROPERTIES PASS_REGULAR_EXPRESSION
    "builder hook setup must be callable as `void setup\\(metric_store&")

# xtel_light_header_test(NAME SOURCE [FLAGS...]): SOURCE compiled with -H, which prints every
# header it includes, one per line, on stderr; light_header_check.cmake fails on a heavy one.
function(xtel_light_header_test name source)
    set(flags ${XTEL_COMPILE_FLAGS} ${ARGN})
    add_test(NAME "${name}"
        COMMAND ${CMAKE_COMMAND}
            -DCOMPILER=${CMAKE_CXX_COMPILER}
            "-DFLAGS=${flags}"
            -DSOURCE=${CMAKE_CURRENT_SOURCE_DIR}/compile/${source}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/compile/light_header_check.cmake)
endfunction()
xtel_light_header_test(
    "compile: xtel/agent/agent.hpp includes neither the UCX backend nor an exporter"
    light_agent_header.cpp)
xtel_light_header_test(
    "compile: xtel/registry/runtime_telemetry.hpp includes neither the pipeline nor an exporter"
    light_telemetry_header.cpp)
# Its old path, xtel/agent/runtime_telemetry.hpp, still works for programs that include it.
xtel_light_header_test(
    "compile: the old path xtel/agent/runtime_telemetry.hpp still compiles, as light"
    light_telemetry_header.cpp -DXTEL_OLD_INCLUDE_PATH)

# The components' dependency rule (docs/architecture.md): no include goes up the components,
# and the tools include public headers only and name no detail:: (tests/layering_test.py).
add_test(NAME "layering: every include goes down the components and tools use public headers only"
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/layering_test.py ${PROJECT_SOURCE_DIR})

# The library's own sources at Release's optimization, with the warnings its targets turn on
# made errors: g++ 12 warned (-Wrestrict, a false positive of std::string's operator+ inlined at
# -O3) on every Release build of src/trace/sampler.cpp, 20 lines that hid any real warning.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_test(NAME "compile: src/trace/sampler.cpp compiles without a warning at Release's -O3"
        COMMAND ${CMAKE_CXX_COMPILER} -std=c++20 -O3 -DNDEBUG -Wall -Wextra -Wpedantic -Werror
            -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_SOURCE_DIR}/src -c -o /dev/null
            ${PROJECT_SOURCE_DIR}/src/trace/sampler.cpp)
endif()

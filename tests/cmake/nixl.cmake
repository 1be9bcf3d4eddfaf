# xtel's NIXL plug-in under the real NIXL of its published wheel (tests/nixl/plugin_test.py),
# which the test installs into a virtual environment of the build (scripts/deps, once: a rerun
# finds it there), then drives two NIXL agents whose telemetry xtel-exporter serves. Not under
# the sanitizers: NIXL's Python does not load a sanitized library.
set(XTEL_NIXL_VENV ${PROJECT_BINARY_DIR}/nixl-venv CACHE PATH
    "The virtual environment the NIXL plug-in's test installs NIXL's wheel into")
set(XTEL_NIXL_PREVIOUS_VENV ${PROJECT_BINARY_DIR}/nixl-previous-venv CACHE PATH
    "The virtual environment tests/nixl/previous_test.py installs the NIXL before it into")

# One NIXL test: tests/nixl/<script> with the arguments every one takes and `ARGS`; skipped
# (exit status 77) when the package index cannot be reached. They run side by side on what the
# set-up test below made, except those marked SERIAL, which change it.
function(xtel_nixl_test name script)
    cmake_parse_arguments(PARSE_ARGV 2 arg "SERIAL" "" "ARGS")
    add_test(NAME "${name}"
        COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/nixl/${script}
            --source-dir ${PROJECT_SOURCE_DIR} --venv ${XTEL_NIXL_VENV}
            --plugin $<TARGET_FILE:xtel_nixl_plugin> ${arg_ARGS})
    set_tests_properties("${name}" PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 240
        FIXTURES_REQUIRED xtel_nixl_venv)
    if(arg_SERIAL)
        set_tests_properties("${name}" PROPERTIES RUN_SERIAL TRUE)
    endif()
endfunction()

if(TARGET xtel_nixl_plugin AND TARGET xtel-exporter AND TARGET xtel_cli AND NOT XTEL_SANITIZE)
    set(exporter --exporter $<TARGET_FILE:xtel-exporter>)
    # The venv (pip may need the time of a download the first time) and the plug-in's link.
    add_test(NAME "nixl: set-up: the pinned NIXL wheel is in the build's venv and xtel's plug-in in its plug-in directory"
        COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/nixl/setup_venv.py
            --source-dir ${PROJECT_SOURCE_DIR} --venv ${XTEL_NIXL_VENV}
            --plugin $<TARGET_FILE:xtel_nixl_plugin>)
    set_tests_properties("nixl: set-up: the pinned NIXL wheel is in the build's venv and xtel's plug-in in its plug-in directory"
        PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 FIXTURES_SETUP xtel_nixl_venv)
    xtel_nixl_test("nixl: xtel-exporter serves exactly what two real NIXL agents moved and failed through xtel's plug-in, and a bad output path, variable or agent name costs a log line, not a transfer"
        plugin_test.py ARGS ${exporter})
    xtel_nixl_test("nixl: one xtel-exporter port serves four ranks of real NIXL agents apart and their sums exactly, where NIXL's own exporter serves one rank a port"
        ranks_test.py ARGS ${exporter})
    xtel_nixl_test("nixl: real NIXL agents whose plug-in meets a full 2 MiB tmpfs transfer everything, and each logs its node file and its notice refused for want of space"
        full_tmpfs_test.py ARGS ${exporter})
    xtel_nixl_test("nixl: an xtel-exporter started after real NIXL agents transferred serves their totals exactly, and one restarted after it was killed serves the same"
        exporter_restart_test.py ARGS ${exporter})
    xtel_nixl_test("nixl: xtel's plug-in and NIXL's own prometheus exporter serve the same values, family by family, for the same two real NIXL agents"
        prometheus_test.py ARGS ${exporter})
    xtel_nixl_test("nixl: xtel-exporter serves exactly what two real NIXL agents moved from NIXL's own BUFFER rings, and refuses a copy truncated, of another version, size or owner once, serving nothing of it"
        files_test.py ARGS ${exporter})
    xtel_nixl_test("nixl: xtel-exporter serves the same agent series as NIXL's own prometheus_mp port from its stores, nothing once their writer ended, and refuses a copy truncated, grown, of another schema, pid or owner once, serving nothing of it"
        store_test.py ARGS ${exporter})
    xtel_nixl_test("nixl: the plug-in built for NIXL 1.5 serves exactly what two real NIXL 1.4 agents moved and failed, where NIXL's exporter class has no batch hooks"
        previous_test.py ARGS ${exporter} --previous-venv ${XTEL_NIXL_PREVIOUS_VENV})
    find_program(XTEL_PROMETHEUS prometheus)
    if(XTEL_PROMETHEUS)
        xtel_nixl_test("nixl: monitoring's rules and dashboards over real NIXL agents through the plug-in answer in a real Prometheus, all but those that compare peers"
            rules_test.py ARGS ${exporter} --prometheus ${XTEL_PROMETHEUS})
        xtel_nixl_test("nixl: monitoring's recording rules over real NIXL agents' prometheus_mp stores answer in a real Prometheus, all but those over transfer time and those that compare peers"
            store_rules_test.py ARGS ${exporter} --prometheus ${XTEL_PROMETHEUS})
    endif()
    # It takes the link away and makes it again: alone.
    xtel_nixl_test("nixl: xtel nixl install links the plug-in into the real NIXL's plug-in directory once, refuses what is not its own, and NIXL loads it from there"
        install_test.py SERIAL ARGS --xtel $<TARGET_FILE:xtel_cli>)
    # bench/nixl_cost.py, the cost of each NIXL exporter to a real transfer loop, in its smoke
    # mode: that it runs and each exporter counts every transfer, nothing about speed
    # (docs/performance.md).
    xtel_nixl_test("nixl: bench/nixl_cost.py runs real NIXL agents with telemetry off, NIXL's two exporters and xtel's in paired windows, and each exporter counts every transfer"
        cost_smoke_test.py ARGS --xtel $<TARGET_FILE:xtel_cli> ${exporter})
endif()
# The unit tests drive the plug-in's exporter without NIXL (tests/unit/nixl_exporter_test.cpp).
if(TARGET xtel_unit_tests)
    target_link_libraries(xtel_unit_tests PRIVATE xtel_nixl)
endif()
# The plug-in links no UCX library: inside NIXL's process, Debian's UCX would meet the one NIXL
# bundles (tests/link_test.py, as for the programs that only read files). And it needs nothing
# but the C and C++ runtime: an engine's image has no libfmt of Debian's, and a plug-in NIXL
# cannot load makes NIXL throw out of the agent's constructor (src/nixl/fmt_inline.cpp).
find_program(XTEL_READELF readelf)
# The runtime alone for the plug-in as it ships (g++, no sanitizer: src/CMakeLists.txt says why).
if(XTEL_READELF AND TARGET xtel_nixl_plugin)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND NOT XTEL_SANITIZE)
        set(runtime_only --runtime-only)
        set(test_name "link: libtelemetry_exporter_xtel.so links no UCX and needs the C and C++ runtime alone")
    else()
        set(runtime_only)
        set(test_name "link: libtelemetry_exporter_xtel.so links and needs no UCX library")
    endif()
    add_test(NAME "${test_name}"
        COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/link_test.py
            ${PROJECT_BINARY_DIR} ${XTEL_READELF} ${runtime_only}
            xtel_nixl_plugin=$<TARGET_FILE:xtel_nixl_plugin>)
endif()

# deploy/: the systemd unit of xtel-exporter and the Kubernetes manifests (docs/deployment.md).
#
# The unit: systemd-analyze (Debian package systemd) verifies a copy whose ExecStart names the
# built xtel-exporter, and rates its exposure; tests/deploy/systemd_sandbox_test.sh runs the
# built program with the unit's options, privileges and read-only /dev/shm beside real
# xfer_demo agents, where no systemd runs as PID 1 to start it (root only: skipped otherwise).
find_program(XTEL_SYSTEMD_ANALYZE systemd-analyze)
if(TARGET xtel-exporter)
    set(xtel_unit_test ${CMAKE_CURRENT_SOURCE_DIR}/deploy/systemd_unit_test.sh)
    set(xtel_exporter_bin $<TARGET_FILE:xtel-exporter>)
    if(XTEL_SYSTEMD_ANALYZE)
        add_test(NAME "deploy: the systemd unit passes systemd-analyze verify"
            COMMAND ${xtel_unit_test} verify ${PROJECT_SOURCE_DIR} ${xtel_exporter_bin})
        add_test(NAME "deploy: the systemd unit with several-uids.conf passes systemd-analyze verify"
            COMMAND ${xtel_unit_test} verify ${PROJECT_SOURCE_DIR} ${xtel_exporter_bin}
                    several-uids.conf)
        add_test(NAME "deploy: systemd-analyze security rates the unit's exposure 2.0 or lower"
            COMMAND ${xtel_unit_test} security ${PROJECT_SOURCE_DIR} ${xtel_exporter_bin})
        add_test(NAME "deploy: the unit check fails on a misspelt directive"
            COMMAND ${xtel_unit_test} broken ${PROJECT_SOURCE_DIR} ${xtel_exporter_bin})
        set_tests_properties("deploy: the unit check fails on a misspelt directive" PROPERTIES
            PASS_REGULAR_EXPRESSION "Unknown key 'ProtectHomme'")
    else()
        message(STATUS "systemd-analyze not found (Debian package systemd): the systemd unit's "
                       "checks are left out")
    endif()
    if(TARGET xfer_demo)
        foreach(mode same-uid several-uids)
            if(mode STREQUAL "same-uid")
                set(name "deploy: xtel-exporter run as the unit runs it serves a real xfer_demo's agents of its own uid with no capability")
            else()
                set(name "deploy: xtel-exporter run as several-uids.conf runs it serves real xfer_demo agents of two uids")
            endif()
            add_test(NAME "${name}"
                COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/deploy/systemd_sandbox_test.sh ${mode}
                        ${PROJECT_SOURCE_DIR} ${xtel_exporter_bin} $<TARGET_FILE:xfer_demo>)
            set_tests_properties("${name}" PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60)
        endforeach()
    endif()
endif()

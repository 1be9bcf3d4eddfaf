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

# The Kubernetes manifests: deploy/kubernetes/test/validate.mjs checks each against the schema
# of its kind with kubernetes-models and @kubernetes-models/prometheus-operator (npm, installed
# by scripts/deps' xtel_install_npm_test_deps); the generated ConfigMaps and PrometheusRules
# must be what deploy/kubernetes/generate makes from monitoring/ now.
find_program(XTEL_NODE node)
set(xtel_k8s ${PROJECT_SOURCE_DIR}/deploy/kubernetes)
add_test(NAME "deploy: the generated ConfigMaps match monitoring/"
    COMMAND ${Python3_EXECUTABLE} ${xtel_k8s}/generate --check)
add_test(NAME "deploy: the generator's check fails when monitoring/ changes without it"
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/deploy/generate_stale_test.sh ${Python3_EXECUTABLE}
            ${PROJECT_SOURCE_DIR})
if(XTEL_NODE)
    # The examples (the NIXL engine's Deployment) are checked too, though no kustomization
    # lists them.
    file(GLOB xtel_k8s_manifests CONFIGURE_DEPENDS ${xtel_k8s}/*.yaml ${xtel_k8s}/examples/*.yaml)
    file(GLOB xtel_k8s_generated CONFIGURE_DEPENDS ${xtel_k8s}/*.generated.yaml)
    set(xtel_validate ${XTEL_NODE} ${xtel_k8s}/test/validate.mjs)
    add_test(NAME "deploy: every Kubernetes manifest validates against its schema"
        COMMAND ${xtel_validate} ${xtel_k8s_manifests})
    add_test(NAME "deploy: the generated objects carry monitoring/'s files unchanged"
        COMMAND ${xtel_validate} --carries ${PROJECT_SOURCE_DIR} ${xtel_k8s_generated})
    add_test(NAME "deploy: the validator rejects a DaemonSet whose hostPID is a string"
        COMMAND ${xtel_validate} ${xtel_k8s}/test/broken/daemonset-hostpid-string.yaml)
    set_tests_properties("deploy: the validator rejects a DaemonSet whose hostPID is a string"
        PROPERTIES PASS_REGULAR_EXPRESSION "/spec/template/spec/hostPID must be boolean")
    add_test(NAME "deploy: the validator rejects a PodMonitor whose endpoints are not a list"
        COMMAND ${xtel_validate} ${xtel_k8s}/test/broken/podmonitor-endpoints-mapping.yaml)
    set_tests_properties("deploy: the validator rejects a PodMonitor whose endpoints are not a list"
        PROPERTIES PASS_REGULAR_EXPRESSION "/spec/podMetricsEndpoints must be array")
else()
    message(STATUS "node not found (Node.js 20): the Kubernetes manifests' schema checks are left out")
endif()

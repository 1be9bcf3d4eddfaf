# The Grafana dashboards (monitoring/dashboards): their JSON holds what Grafana needs, and every
# query of every panel parses and answers with series in a real Prometheus that scrapes
# xtel-exporter over xfer_demo agents and evaluates xtel's rules (tests/dashboards_test.py says
# how the windows and the variables are replaced).
add_test(NAME "dashboards: both dashboards are Grafana JSON with unique panel ids, whole grid positions and the datasource variable"
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/dashboards_test.py
        --source-dir ${PROJECT_SOURCE_DIR} --structure-only)

find_program(XTEL_PROMETHEUS prometheus)
if(XTEL_PROMETHEUS AND TARGET xfer_demo AND TARGET xtel-exporter)
    set(test_name "dashboards: every panel's query parses and answers with series from a real Prometheus over xtel-exporter and xfer_demo agents")
    add_test(NAME "${test_name}"
        COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/dashboards_test.py
            --source-dir ${PROJECT_SOURCE_DIR} --xfer-demo $<TARGET_FILE:xfer_demo>
            --exporter $<TARGET_FILE:xtel-exporter> --prometheus ${XTEL_PROMETHEUS})
    # Eight agents moving data for the whole test: run alone, so that no other test starves it.
    set_tests_properties("${test_name}" PROPERTIES TIMEOUT 240 RUN_SERIAL TRUE)
endif()

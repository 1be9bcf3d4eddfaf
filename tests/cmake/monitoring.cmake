# The monitoring files (monitoring/rules): the rule files pass `promtool check rules`, their unit
# tests pass `promtool test rules`, and those tests cover every alert both ways and every
# recording rule (tests/monitoring_rules_test.py). promtool comes with Debian's prometheus.
find_program(XTEL_PROMTOOL promtool)
file(GLOB XTEL_RULE_FILES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/monitoring/rules/*.rules.yaml)
file(GLOB XTEL_RULE_TESTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/monitoring/rules/tests/*.test.yaml)
if(XTEL_PROMTOOL AND NOT XTEL_SANITIZE)
    add_test(NAME "monitoring: every rule file passes promtool check rules"
        COMMAND ${XTEL_PROMTOOL} check rules ${XTEL_RULE_FILES})
    add_test(NAME "monitoring: the rules' unit tests pass promtool test rules"
        COMMAND ${XTEL_PROMTOOL} test rules ${XTEL_RULE_TESTS})
    add_test(NAME "monitoring: the rules' unit tests make every alert fire and not fire"
        COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/monitoring_rules_test.py
            ${PROJECT_SOURCE_DIR}/monitoring/rules)
endif()
# The docs' scrape configurations for xtel-exporter name the job the alerting rules select
# (tests/scrape_job_test.py): the quickstart's once named another, and XtelExporterAbsent fired
# for a healthy exporter. Needs Python's yaml only.
add_test(NAME "monitoring: every scrape configuration the docs give for xtel-exporter names the job the alerts select"
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/scrape_job_test.py ${PROJECT_SOURCE_DIR})

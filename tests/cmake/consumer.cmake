# The consumer project is configured, built and run through FetchContent and find_package.
# Not under sanitizers: the consumer is built without them and cannot link a sanitized xtel.
if(NOT XTEL_SANITIZE)
    add_test(NAME "consumer: FetchContent and find_package builds work"
        COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/consumer_test.sh ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
    set_tests_properties("consumer: FetchContent and find_package builds work" PROPERTIES TIMEOUT 900)
endif()

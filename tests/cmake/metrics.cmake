# The user-builder example runs as a test: it exits 0 only when its builder counted exactly the
# transfers that failed.
if(TARGET metrics_builder_example)
    add_test(NAME "example: a user's metrics builder counts the failed transfers per peer"
        COMMAND metrics_builder_example)
    set_tests_properties("example: a user's metrics builder counts the failed transfers per peer"
        PROPERTIES TIMEOUT 60 RUN_SERIAL TRUE
        PASS_REGULAR_EXPRESSION "app_failed_transfers_total\\{agent_name=\"prefill-0\",[^}]*peer=\"Decode-0\",operation=\"write\"\\} 2")
    add_test(NAME "example: the metrics builder example answers --help and takes no option"
        COMMAND sh -c "\"$1\" --help | grep -q '^usage: .*(no options' && ! \"$1\" --bogus 2>/dev/null"
            sh $<TARGET_FILE:metrics_builder_example>)
endif()

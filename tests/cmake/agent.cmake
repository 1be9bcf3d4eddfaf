# The agent tests: the two-process ones run examples/xfer_demo as the other agent, and the GPU
# test needs to know whether this build has CUDA.
if(TARGET xtel_integration_tests)
    if(TARGET xfer_demo)
        add_dependencies(xtel_integration_tests xfer_demo)
        target_compile_definitions(xtel_integration_tests PRIVATE
            XTEL_XFER_DEMO="$<TARGET_FILE:xfer_demo>")
    endif()
    if(XTEL_HAVE_CUDA)
        target_compile_definitions(xtel_integration_tests PRIVATE XTEL_TEST_HAVE_CUDA=1)
    endif()
endif()
# The node's exporter: its tests run it over the node files of xfer_demo processes.
if(TARGET xtel_integration_tests AND TARGET xtel-exporter)
    add_dependencies(xtel_integration_tests xtel-exporter)
    target_compile_definitions(xtel_integration_tests PRIVATE
        XTEL_EXPORTER="$<TARGET_FILE:xtel-exporter>")
endif()

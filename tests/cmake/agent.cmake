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
# A build with CUDA loads the runtime when GPU memory is first registered: no program linked with
# xtel needs libcudart to start (the GPU test above shows the runtime loaded and asked).
find_program(XTEL_READELF readelf)
if(XTEL_HAVE_CUDA AND XTEL_READELF AND TARGET xfer_demo)
    add_test(NAME "agent: programs built with CUDA support start without the CUDA runtime"
        COMMAND sh -c "! ${XTEL_READELF} -d \"$1\" | grep -i 'NEEDED.*cudart'" sh
            $<TARGET_FILE:xfer_demo>)
endif()

# cmake -DCOMPILER=... -DFLAGS=... -DSOURCE=... -P light_header_check.cmake
# Compiles SOURCE with -H and fails when it does not compile, or when a header it includes is
# one a program that only calls the factories (make_agent, make_telemetry) must not see: the UCX
# backend or UCX itself, an exporter, the pipeline template or the list of pipelines.
execute_process(COMMAND ${COMPILER} ${FLAGS} -H ${SOURCE}
    RESULT_VARIABLE rc ERROR_VARIABLE included OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${SOURCE} does not compile:\n${included}")
endif()
set(forbidden "ucx_backend\\.hpp|/ucp/|/ucs/|xtel/exporters/|xtel/core/telemetry\\.hpp|xtel/agent/basic_agent\\.hpp|xtel/metrics/|xtel/plugin/")
string(REGEX MATCHALL "[^\n]*(${forbidden})[^\n]*" found "${included}")
if(found)
    string(REPLACE ";" "\n" found "${found}")
    message(FATAL_ERROR "${SOURCE} includes headers it must not:\n${found}")
endif()
string(REGEX MATCHALL "\\.+ [^\n]*xtel/[^\n]*" xtel_headers "${included}")
list(LENGTH xtel_headers count)
message(STATUS "${SOURCE}: ${count} xtel headers, none of the backend or the exporters")

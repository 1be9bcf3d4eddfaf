# Fuzz targets. Every build replays the committed corpora through each target (a plain
# driver, no libFuzzer). With XTEL_FUZZ=ON (clang only) the libFuzzer binaries are built too,
# and each runs briefly as a test; scripts/fuzz runs them for longer.
file(GLOB XTEL_FUZZ_TARGETS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_*.cpp)
set(XTEL_FUZZ_SECONDS 10 CACHE STRING "Seconds each fuzzer runs in the test suite")

foreach(src IN LISTS XTEL_FUZZ_TARGETS)
    get_filename_component(name ${src} NAME_WE)
    string(REGEX REPLACE "^fuzz_" "" corpus ${name})
    set(corpus_dir ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${corpus})
    # The OTLP target reads with the push clients' library, which is not built when
    # XTEL_PUSH is off, and decodes what it encodes with their messages and snappy.
    set(extra)
    if(name STREQUAL "fuzz_otlp")
        if(NOT TARGET xtel_push)
            continue()
        endif()
        set(extra xtel_push xtel_push_proto xtel_snappy)
    endif()
    # NIXL's ring and store readers are in the nixl component, which xtel::xtel leaves out.
    if(name STREQUAL "fuzz_nixl_ring" OR name STREQUAL "fuzz_nixl_store")
        set(extra xtel_nixl)
    endif()

    add_executable(${name}_replay ${src} fuzz/replay_main.cpp)
    # zlib: the HTTP target inflates gzip answers to check them.
    target_link_libraries(${name}_replay PRIVATE xtel::xtel ZLIB::ZLIB ${extra})
    # Targets may reach into src/ for a function the library keeps private (the HTTP parser).
    target_include_directories(${name}_replay PRIVATE ${PROJECT_SOURCE_DIR}/src)
    add_test(NAME "fuzz: ${corpus} corpus replays cleanly" COMMAND ${name}_replay ${corpus_dir})

    if(XTEL_FUZZ)
        add_executable(${name} ${src})
        target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
        target_link_options(${name} PRIVATE -fsanitize=fuzzer)
        target_link_libraries(${name} PRIVATE xtel::xtel ZLIB::ZLIB ${extra})
        target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src)
        # Runs on a scratch copy of the corpus, so the committed seeds stay as they are.
        add_test(NAME "fuzz: ${corpus} survives ${XTEL_FUZZ_SECONDS} s of libFuzzer"
            COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=1
                ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_fuzzer.sh $<TARGET_FILE:${name}> ${corpus_dir}
                ${XTEL_FUZZ_SECONDS})
        set_tests_properties("fuzz: ${corpus} survives ${XTEL_FUZZ_SECONDS} s of libFuzzer"
            PROPERTIES TIMEOUT 600 RUN_SERIAL TRUE)
    endif()
endforeach()

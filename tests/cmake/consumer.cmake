# The consumer project is configured, built and run through FetchContent and find_package.
# Not under sanitizers: the consumer is built without them and cannot link a sanitized xtel.
if(NOT XTEL_SANITIZE)
    add_test(NAME "consumer: FetchContent, and find_package from the Debian packages, build and run"
        COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/consumer_test.sh ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
    set_tests_properties("consumer: FetchContent, and find_package from the Debian packages, build and run" PROPERTIES TIMEOUT 900)
endif()

# Formatting: every tracked C++ source matches .clang-format (the style STYLE.md asks for).
find_program(XTEL_CLANG_FORMAT clang-format)
find_program(XTEL_GIT git)
if(XTEL_CLANG_FORMAT AND XTEL_GIT AND EXISTS ${PROJECT_SOURCE_DIR}/.git AND NOT XTEL_SANITIZE)
    add_test(NAME "format: every C++ source matches .clang-format"
        COMMAND sh -c "${XTEL_GIT} ls-files '*.hpp' '*.cpp' | xargs ${XTEL_CLANG_FORMAT} --dry-run --Werror"
        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endif()

# The first build most people try: `cmake -S . -B build && cmake --build build` with the default
# generator, which is not the Ninja the scripts use.
if(XTEL_PUSH AND NOT XTEL_SANITIZE)
    add_test(NAME "build: the default generator builds the protobuf messages"
        COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/default_generator_test.sh ${PROJECT_SOURCE_DIR})
    set_tests_properties("build: the default generator builds the protobuf messages"
        PROPERTIES TIMEOUT 600)
endif()

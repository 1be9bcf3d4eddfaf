# The size rule: no file of src/, include/ or tools/ over 500 lines, no function over 80
# (tests/size_test.py). Function lengths are lizard's (PyPI), which scripts/test installs into a
# virtual environment of the build folder and names here; without it the test checks the files
# only and reports itself skipped.
set(XTEL_LIZARD_PYTHON "" CACHE FILEPATH
    "A Python that can import lizard, for the size test (scripts/test installs one)")
if(XTEL_LIZARD_PYTHON)
    set(xtel_size_python ${XTEL_LIZARD_PYTHON})
else()
    set(xtel_size_python ${Python3_EXECUTABLE})
endif()
add_test(NAME "size: no source file is over 500 lines and no function over 80, and the listed ones do not grow"
    COMMAND ${xtel_size_python} ${CMAKE_CURRENT_SOURCE_DIR}/size_test.py ${PROJECT_SOURCE_DIR})
set_tests_properties("size: no source file is over 500 lines and no function over 80, and the listed ones do not grow"
    PROPERTIES SKIP_RETURN_CODE 77)

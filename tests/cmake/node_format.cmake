# docs/node-format.md is enough to read a node file: a reader written from it alone (Python,
# standard library) reads the fixed file tests/data/node/prefill-0.metrics, header, every
# family, series, bound and exemplar, as prefill-0.expected lists them, and the values its
# checks write out by hand from the writer's inputs (tests/data/node/README.md). The unit test
# "the fixed node file reads through xtel's reader ..." ([node_file]) reads it with xtel's own.
add_test(NAME "node format: a reader written from docs/node-format.md alone reads the fixed node file as listed"
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/node_format_test.py ${PROJECT_SOURCE_DIR})

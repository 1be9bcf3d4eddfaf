# bench/summarize.py's targets judged on small JSON fixtures (tests/bench_summarize_test.py):
# the harness runs only by hand (scripts/bench), so its judgement of a target is tested here,
# met and missed, without running it. Python's standard library only.
add_test(NAME "bench: summarize.py judges the prometheus-cpp peer target met at half the peer's record and missed above, paired cases first"
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/bench_summarize_test.py
        ${PROJECT_SOURCE_DIR})

#pragma once
// Helpers for the plugin tests: a temporary directory, environment variables set for one scope,
// captured log lines, and the message of an expected exporter_error.

#include <stdlib.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "test_util.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/log.hpp"

namespace xtel::test {

using xtel_test::log_capture;
using xtel_test::scoped_env;
using xtel_test::temp_dir;

/// The message of the exporter_error that `f` throws; fails the test if it throws nothing or
/// something else.
template <class F>
std::string exporter_error_of(F&& f) {
    try {
        f();
    } catch (const exporter_error& e) {
        return e.what();
    }
    FAIL("expected an xtel::exporter_error");
    return {};
}

inline std::vector<std::string> read_lines(const std::filesystem::path& file) {
    std::ifstream in(file);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) {
        lines.push_back(line);
    }
    return lines;
}

inline void write_file(const std::filesystem::path& file, std::string_view text) {
    std::ofstream(file, std::ios::binary) << text;
}

}  // namespace xtel::test

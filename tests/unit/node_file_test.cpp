// The node file: payloads published whole and read back whole while the writer goes on, the
// file's ownership rules (one writer per name, crashed writers' files kept), and what a writer
// and a reader do when the file is damaged, truncated or not a node file at all.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"
#include "xtel/core/config.hpp"
#include "xtel/core/error.hpp"
#include "xtel/core/log.hpp"
#include "xtel/node/file.hpp"

namespace node_file_test {

namespace nf = xtel::node::file;

namespace {

/// `size` bytes, each `number mod 251`: a payload that says which publish it came from, so a
/// reader can tell a torn copy (bytes of two publishes, or the wrong length) from a whole one.
std::vector<std::byte> numbered_payload(std::uint64_t number, std::size_t size) {
    return std::vector<std::byte>(size, static_cast<std::byte>(number % 251));
}

/// Sizes that vary and outgrow the first areas several times (64 KiB, then up to 1 MiB).
std::size_t size_of_publish(std::uint64_t number) {
    return static_cast<std::size_t>((number * 7919) % (number < 200 ? 70'000 : 1'100'000));
}

bool is_whole(const nf::publication& p) {
    return p.payload.size() == size_of_publish(p.number) &&
           std::all_of(p.payload.begin(), p.payload.end(),
                       [&](std::byte b) { return b == static_cast<std::byte>(p.number % 251); });
}

std::string slurp(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
}

std::vector<std::string> file_names(const std::filesystem::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        out.push_back(e.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

/// Forks a process that creates a writer for `name`, publishes `payload` and exits without
/// running the writer's destructor, as a crash would. Returns its pid once it has exited.
pid_t crash_a_writer(const xtel_test::temp_dir& dir,
                     const char* name,
                     const std::vector<std::byte>& payload) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        auto* w = new nf::writer(dir.path(), name);  // never deleted: the crash
        ::_exit(w->publish(payload) ? 0 : 1);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    return child;
}

/// Sets the process umask for the life of the scope.
class scoped_umask {
  public:
    explicit scoped_umask(mode_t m) : old_(::umask(m)) {}
    ~scoped_umask() { ::umask(old_); }
    scoped_umask(const scoped_umask&) = delete;
    scoped_umask& operator=(const scoped_umask&) = delete;

  private:
    mode_t old_;
};

/// Overwrites `size` bytes at `offset` of an existing file.
template <class T>
void poke(const std::filesystem::path& path, std::size_t offset, const T& value) {
    const int fd = ::open(path.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    REQUIRE(::pwrite(fd, &value, sizeof value, static_cast<off_t>(offset)) ==
            static_cast<ssize_t>(sizeof value));
    ::close(fd);
}

}  // namespace

TEST_CASE("a published payload reads back byte for byte with the writer's facts", "[node_file]") {
    xtel_test::temp_dir dir;
    nf::writer w(dir.path(), "agent");
    CHECK(w.path() == dir / "agent.metrics");
    const auto payload = numbered_payload(1, 1000);
    REQUIRE(w.publish(payload));

    nf::reader r(w.path());
    const auto p = r.read_latest();
    REQUIRE(p);
    CHECK(p->number == 1);
    CHECK(p->payload == payload);
    CHECK(p->published_us >= r.created_us());
    CHECK(r.published() == 1);
    CHECK(r.agent_name() == "agent");
    CHECK(r.writer_pid() == static_cast<std::uint32_t>(::getpid()));
    CHECK(r.start_time_us() > 0);
    CHECK(r.start_time_us() <= r.created_us());
    CHECK_FALSE(r.closed());
    CHECK(r.writer_alive());
}

TEST_CASE("a node file nothing was published to reads as publication 0 with no bytes",
          "[node_file]") {
    xtel_test::temp_dir dir;
    nf::writer w(dir.path(), "agent");
    nf::reader r(w.path());
    const auto p = r.read_latest();
    REQUIRE(p);
    CHECK(p->number == 0);
    CHECK(p->payload.empty());
    CHECK(r.published() == 0);
}

TEST_CASE("each publish replaces the latest payload also when it grows the file", "[node_file]") {
    xtel_test::temp_dir dir;
    nf::writer w(dir.path(), "agent");
    nf::reader r(w.path());
    const std::size_t sizes[] = {10, 200'000, 0, 5, 3'000'000, 70'000, 1};
    std::uint64_t number = 0;
    for (const std::size_t size : sizes) {
        CAPTURE(size);
        const auto payload = numbered_payload(++number, size);
        REQUIRE(w.publish(payload));
        const auto p = r.read_latest();
        REQUIRE(p);
        CHECK(p->number == number);
        CHECK(p->payload == payload);
    }
    CHECK(w.published() == number);
    CHECK(std::filesystem::file_size(w.path()) >= nf::header_size + 2 * 4 * 1024 * 1024);
}

TEST_CASE("a reader copying while the writer publishes never sees a torn payload",
          "[node_file][concurrency]") {
    xtel_test::temp_dir dir;
    nf::writer w(dir.path(), "agent");
    constexpr std::uint64_t publishes = 600;
    std::atomic<bool> done{false};
    std::thread publisher([&] {
        for (std::uint64_t n = 1; n <= publishes; ++n) {
            if (!w.publish(numbered_payload(n, size_of_publish(n)))) {
                break;
            }
        }
        done.store(true);
    });
    nf::reader r(w.path());
    std::uint64_t copies = 0;
    std::uint64_t torn = 0;
    std::uint64_t last = 0;
    bool went_back = false;
    while (!done.load()) {
        const auto p = r.read_latest();
        if (!p) {
            continue;  // busy: the writer published during every attempt
        }
        ++copies;
        torn += is_whole(*p) ? 0 : 1;
        went_back = went_back || p->number < last;
        last = p->number;
    }
    publisher.join();
    CHECK_FALSE(w.failed());
    CHECK(w.published() == publishes);
    CHECK(torn == 0);
    CHECK_FALSE(went_back);
    CHECK(copies > 0);
    const auto p = r.read_latest();
    REQUIRE(p);
    CHECK(p->number == publishes);
    CHECK(is_whole(*p));
}

TEST_CASE("the node file is 0600 even under a umask that lets everyone write", "[node_file]") {
    xtel_test::temp_dir dir;
    const scoped_umask open_to_all(0);
    nf::writer w(dir.path(), "agent");
    struct stat st {};
    REQUIRE(::stat(w.path().c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("a second node file writer of a live name throws naming the live writer's pid",
          "[node_file]") {
    xtel_test::temp_dir dir;
    nf::writer first(dir.path(), "agent");
    REQUIRE(first.publish(numbered_payload(1, 100)));
    const auto before = slurp(first.path());
    CHECK_THROWS_AS(nf::writer(dir.path(), "agent"), xtel::exporter_error);
    CHECK_THROWS_WITH(nf::writer(dir.path(), "agent"),
                      Catch::Contains(first.path().string()) && Catch::Contains("live writer") &&
                          Catch::Contains("process " + std::to_string(::getpid())));
    CHECK(slurp(first.path()) == before);
    CHECK(file_names(dir.path()) == std::vector<std::string>{"agent.metrics"});
    CHECK(first.publish(numbered_payload(2, 100)));
}

TEST_CASE("a node file left by a crashed writer is kept as <name>.metrics.crashed.<pid>",
          "[node_file]") {
    xtel_test::temp_dir dir;
    const auto payload = numbered_payload(7, 5000);
    const pid_t dead = crash_a_writer(dir, "agent", payload);
    {
        nf::reader left(dir / "agent.metrics");
        CHECK_FALSE(left.closed());
        CHECK_FALSE(left.writer_alive());
    }
    const auto kept = dir / ("agent.metrics.crashed." + std::to_string(dead));
    const xtel_test::log_capture logs;
    nf::writer w(dir.path(), "agent");

    REQUIRE(std::filesystem::exists(kept));
    nf::reader old(kept);
    CHECK(old.writer_pid() == static_cast<std::uint32_t>(dead));
    const auto p = old.read_latest();
    REQUIRE(p);
    CHECK(p->payload == payload);
    const auto warnings = logs.at(xtel::log_level::warning);
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Catch::Contains("node file") &&
                                Catch::Contains("process " + std::to_string(dead)) &&
                                Catch::Contains(kept.string()));
    CHECK(nf::reader(w.path()).published() == 0);
}

TEST_CASE("a writer that died in the middle of a publish leaves the previous payload readable",
          "[node_file]") {
    xtel_test::temp_dir dir;
    const auto payload = numbered_payload(1, 3000);
    crash_a_writer(dir, "agent", payload);
    const auto path = dir / "agent.metrics";
    // Its next publish had made the generation odd (2 -> 3) when it died.
    poke(path, offsetof(nf::file_header, generation), std::uint64_t{3});
    nf::reader r(path);
    const auto p = r.read_latest();
    REQUIRE(p);
    CHECK(p->number == 1);
    CHECK(p->payload == payload);
}

TEST_CASE("a writer that died in its first publish leaves a file that reads as no payload yet",
          "[node_file]") {
    xtel_test::temp_dir dir;
    crash_a_writer(dir, "agent", numbered_payload(1, 3000));
    const auto path = dir / "agent.metrics";
    // As if it had died between steps 4 and 5 of its first publish: the generation odd at 1,
    // no descriptor naming a publish. The reader looks for generation 0 and compares with 1.
    poke(path, offsetof(nf::file_header, generation), std::uint64_t{1});
    for (std::size_t i = 0; i < 2; ++i) {
        poke(path,
             offsetof(nf::file_header, areas) + i * sizeof(nf::area) +
                 offsetof(nf::area, generation),
             std::uint64_t{0});
    }
    nf::reader r(path);
    const auto p = r.read_latest();
    REQUIRE(p);  // an answer, not "busy"
    CHECK(p->number == 0);
    CHECK(p->payload.empty());
    CHECK(r.published() == 0);
}

TEST_CASE("a reader refuses what is not a node file with format_error", "[node_file]") {
    xtel_test::temp_dir dir;
    const auto path = dir / "x.metrics";
    const std::string what = GENERATE("missing", "empty", "short header", "foreign", "fifo",
                                      "directory", "bad version", "bad state");
    CAPTURE(what);
    std::string reason;
    nf::fault kind = nf::fault::wrong_format;
    if (what == "empty") {
        std::ofstream{path};
        reason = "truncated";
    } else if (what == "short header") {
        std::ofstream(path) << std::string(100, 'x');
        reason = "truncated";
    } else if (what == "foreign") {
        std::ofstream(path) << std::string(4096, 'x');
        reason = "bad magic";
    } else if (what == "fifo") {
        REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
        reason = "not a regular file";
        kind = nf::fault::not_regular;
    } else if (what == "directory") {
        std::filesystem::create_directory(path);
        reason = "directory";
        kind = nf::fault::not_regular;
    } else if (what != "missing") {
        nf::writer w(dir.path(), "x");
        reason = what == "bad version" ? "version 9" : "state 7";
    } else {
        reason = "cannot open";
        kind = nf::fault::unreadable;
    }
    if (what == "bad version") {
        poke(path, offsetof(nf::file_header, version), std::uint32_t{9});
    } else if (what == "bad state") {
        poke(path, offsetof(nf::file_header, state), std::uint32_t{7});
    }
    CHECK_THROWS_AS(nf::reader(path), nf::format_error);
    CHECK_THROWS_WITH(nf::reader(path), Catch::Contains(path.string()) && Catch::Contains(reason));
    try {
        nf::reader r(path);
        FAIL("no format_error");
    } catch (const nf::format_error& e) {
        CHECK(e.kind() == kind);
    }
}

TEST_CASE(
    "a node file larger than the reader's limit is refused as too large before a payload "
    "byte is read",
    "[node_file]") {
    xtel_test::temp_dir dir;
    nf::writer w(dir.path(), "agent");
    REQUIRE(w.publish(numbered_payload(1, 1000)));
    // What a faulty writer left: the latest area claims 256 MiB, in a sparse file that long.
    poke(w.path(), offsetof(nf::file_header, areas) + offsetof(nf::area, capacity),
         nf::max_payload_size);
    poke(w.path(), offsetof(nf::file_header, areas) + offsetof(nf::area, length),
         nf::max_payload_size);
    REQUIRE(::truncate(w.path().c_str(), nf::header_size + nf::max_payload_size) == 0);
    const std::uint64_t limit = 32 << 20;
    try {
        nf::reader r(w.path(), limit);
        FAIL("opened a file over the limit");
    } catch (const nf::format_error& e) {
        CHECK(e.kind() == nf::fault::too_large);
        CHECK_THAT(e.what(),
                   Catch::Contains(std::to_string(nf::header_size + nf::max_payload_size)) &&
                       Catch::Contains(std::to_string(limit)));
    }
}

TEST_CASE("a node file that grows past the reader's limit is refused as too large when read",
          "[node_file]") {
    xtel_test::temp_dir dir;
    nf::writer w(dir.path(), "agent");
    REQUIRE(w.publish(numbered_payload(1, 1000)));
    const auto size = std::filesystem::file_size(w.path());
    nf::reader r(w.path(), size);
    REQUIRE(r.read_latest());
    // Outgrows the first areas: the file gets longer than the reader takes.
    REQUIRE(w.publish(numbered_payload(2, 100'000)));
    REQUIRE(std::filesystem::file_size(w.path()) > size);
    try {
        (void)r.read_latest();
        FAIL("read a file grown over the limit");
    } catch (const nf::format_error& e) {
        CHECK(e.kind() == nf::fault::too_large);
    }
}

TEST_CASE("a reader given an open descriptor reads that file and closes the descriptor",
          "[node_file]") {
    xtel_test::temp_dir dir;
    nf::writer w(dir.path(), "agent");
    const auto payload = numbered_payload(1, 1000);
    REQUIRE(w.publish(payload));
    int fd = ::open(w.path().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    REQUIRE(fd >= 0);
    {
        nf::reader r(fd, w.path());
        CHECK(r.agent_name() == "agent");
        CHECK(r.read_latest()->payload == payload);
    }
    CHECK(::fcntl(fd, F_GETFD) == -1);
    // Closed also when the file is refused.
    REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
    fd = ::open((dir / "fifo").c_str(), O_RDONLY | O_NONBLOCK);
    REQUIRE(fd >= 0);
    CHECK_THROWS_AS(nf::reader(fd, dir / "fifo"), nf::format_error);
    CHECK(::fcntl(fd, F_GETFD) == -1);
}

TEST_CASE("a node file truncated under its reader is a format_error and not a signal",
          "[node_file]") {
    xtel_test::temp_dir dir;
    nf::writer w(dir.path(), "agent");
    REQUIRE(w.publish(numbered_payload(1, 50'000)));
    nf::reader r(w.path());
    REQUIRE(r.read_latest());
    const off_t cut = GENERATE(off_t{nf::header_size + 1000}, off_t{nf::header_size / 2}, off_t{0});
    CAPTURE(cut);
    REQUIRE(::truncate(w.path().c_str(), cut) == 0);
    CHECK_THROWS_AS(r.read_latest(), nf::format_error);
}

TEST_CASE("a node file with a latest area outside the file is refused as damaged", "[node_file]") {
    xtel_test::temp_dir dir;
    nf::writer w(dir.path(), "agent");
    REQUIRE(w.publish(numbered_payload(1, 10)));
    // Publish 1 went to area 0; make it claim more than the file holds, and overflow.
    const std::uint64_t offset = GENERATE(std::uint64_t{1} << 40, ~std::uint64_t{0} - 4);
    poke(w.path(), offsetof(nf::file_header, areas), offset);
    nf::reader r(w.path());
    CHECK_THROWS_WITH(r.read_latest(), Catch::Contains("does not fit the file"));
}

TEST_CASE("a node file writer whose file is cut short or replaced stops with one error",
          "[node_file]") {
    const std::string what = GENERATE("truncated", "grown back", "deleted", "replaced");
    CAPTURE(what);
    xtel_test::temp_dir dir;
    const xtel_test::log_capture logs;
    const auto path = dir / "agent.metrics";
    std::string left;
    {
        nf::writer w(dir.path(), "agent");
        REQUIRE(w.publish(numbered_payload(1, 100)));
        if (what == "truncated") {
            REQUIRE(::truncate(path.c_str(), 0) == 0);
        } else if (what == "grown back") {
            // What a truncation between the writer's size check and its writes leaves: the
            // writes grow the file back, and the size alone looks right.
            const auto size = std::filesystem::file_size(path);
            REQUIRE(::truncate(path.c_str(), 0) == 0);
            REQUIRE(::truncate(path.c_str(), static_cast<off_t>(size)) == 0);
        } else if (what == "deleted") {
            REQUIRE(::unlink(path.c_str()) == 0);
        } else {
            std::ofstream(dir / "other") << "someone else's file";
            REQUIRE(std::rename((dir / "other").c_str(), path.c_str()) == 0);
        }
        left = std::filesystem::exists(path) ? slurp(path) : "(none)";
        CHECK_FALSE(w.publish(numbered_payload(2, 100)));
        CHECK_FALSE(w.publish(numbered_payload(3, 100)));
        CHECK(w.failed());
        CHECK_THAT(w.failure(),
                   Catch::Contains(path.string()) &&
                       Catch::Contains(what == "truncated"    ? "truncated to 0 bytes"
                                       : what == "grown back" ? "its header is gone"
                                                              : "deleted or replaced"));
        CHECK(w.published() == 1);
    }
    const auto errors = logs.at(xtel::log_level::error);
    REQUIRE(errors.size() == 1);
    CHECK_THAT(errors[0], Catch::Contains(path.string()) && Catch::Contains("publishing stopped"));
    // Whatever is at the path now is not written to, not even when the writer closes.
    CHECK((std::filesystem::exists(path) ? slurp(path) : std::string("(none)")) == left);
}

TEST_CASE("a node file is closed once its writer is destroyed and keeps its last payload",
          "[node_file]") {
    xtel_test::temp_dir dir;
    const auto payload = numbered_payload(2, 777);
    {
        nf::writer w(dir.path(), "agent");
        REQUIRE(w.publish(numbered_payload(1, 10)));
        REQUIRE(w.publish(payload));
    }
    nf::reader r(dir / "agent.metrics");
    CHECK(r.closed());
    CHECK_FALSE(r.writer_alive());
    const auto p = r.read_latest();
    REQUIRE(p);
    CHECK(p->number == 2);
    CHECK(p->payload == payload);
    // A closed file is replaced by the next writer of the name, not kept.
    nf::writer next(dir.path(), "agent");
    CHECK(file_names(dir.path()) == std::vector<std::string>{"agent.metrics"});
}

TEST_CASE("a payload over the limit is refused and counted and the previous one stays",
          "[node_file]") {
    xtel_test::temp_dir dir;
    const xtel_test::log_capture logs;
    nf::writer w(dir.path(), "agent");
    const auto payload = numbered_payload(1, 10);
    REQUIRE(w.publish(payload));
    // Never touched: the writer refuses on the size alone.
    const std::size_t huge = nf::max_payload_size + 1;
    const std::unique_ptr<std::byte[]> bytes(new std::byte[huge]);
    CHECK_FALSE(w.publish({bytes.get(), huge}));
    CHECK_FALSE(w.publish({bytes.get(), huge}));
    CHECK_FALSE(w.failed());
    CHECK(w.refused() == 2);
    nf::reader r(w.path());
    CHECK(r.refused() == 2);
    CHECK(r.read_latest()->payload == payload);
    const auto errors = logs.at(xtel::log_level::error);
    REQUIRE(errors.size() == 1);
    CHECK_THAT(errors[0], Catch::Contains("over the limit"));
    CHECK(w.publish(numbered_payload(2, 10)));
}

TEST_CASE("a node file writer refuses an agent name that is not a file name", "[node_file]") {
    xtel_test::temp_dir dir;
    CHECK_THROWS_AS(nf::writer(dir.path(), "../escape"), xtel::config_error);
    CHECK_THROWS_AS(nf::writer(dir.path(), std::string(250, 'a')), xtel::config_error);
    CHECK(file_names(dir.path()).empty());
}

TEST_CASE("a node file writer refuses a symbolic link at its path", "[node_file]") {
    xtel_test::temp_dir dir;
    std::ofstream(dir / "target") << "precious";
    std::filesystem::create_symlink(dir / "target", dir / "agent.metrics");
    CHECK_THROWS_WITH(nf::writer(dir.path(), "agent"), Catch::Contains("symbolic link"));
    CHECK(slurp(dir / "target") == "precious");
}

}  // namespace node_file_test

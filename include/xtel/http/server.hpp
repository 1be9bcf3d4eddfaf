#pragma once
/// A small HTTP/1.1 server of one read-only resource (private to src/): the Prometheus
/// endpoint's transport.
///
/// One thread runs an epoll loop over non-blocking sockets, so no client can hold a thread:
/// a worker-per-connection server (cpp-httplib's, which this replaced) is stopped by as many
/// clients as it has workers sending a request one byte at a time, and it queues every
/// accepted connection without bound. Here:
///   - at most max_connections stay open; past that, a new one that stays closes the one that
///     has waited longest for its request, so a crowd cannot lock a real scraper out; but only
///     once that one has waited request_grace, and after reading what it sent meanwhile, so
///     the crowd cannot close a scraper's connection before its request is read either;
///   - a request head must arrive whole within request_timeout and fit in
///     http::max_head_bytes (request.hpp), and bodies are never read;
///   - a connection holds one answer at a time: the requests a client pipelines behind the one
///     being answered stay in the kernel, beyond the max_head_bytes read with it;
///   - an answer must be taken by the client within write_timeout;
///   - answers share the body the callback gives them (one per representation until the
///     metrics change); bodies that no newer answer shares, held only by connections still
///     writing them, take at most max_held_bytes between them: past that the connection that
///     has taken nothing for longest is closed.
/// The resource may have several representations (formats, gzip): the body callback picks one
/// from the request head, and the answer says which (Content-Type, Content-Encoding) and what
/// it was picked by (Vary).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "xtel/core/host_port.hpp"

namespace xtel::http {

struct parse_result;
struct request_head;

/// The representation of the resource a request gets.
struct entity {
    /// Equal pointers are the same body.
    std::shared_ptr<const std::string> body;
    /// The Content-Type header's value; a constant (it outlives the answer).
    std::string_view content_type;
    /// The body is gzip-compressed: the answer says Content-Encoding: gzip.
    bool gzip = false;
};

struct limits {
    /// Connections open at once; Prometheus needs one per scraper. One more may be open while
    /// every other one is within its request_grace.
    std::size_t max_connections = 64;
    /// From a connection's start, or the end of its previous answer, to a complete request head.
    std::chrono::milliseconds request_timeout{5000};
    /// How long a connection waiting for its request is safe from being closed to admit a newer
    /// one: a client has at least this long between its connect and its request, however many
    /// connect after it (they wait in the kernel's accept queue meanwhile).
    std::chrono::milliseconds request_grace{20};
    /// To send an answer.
    std::chrono::milliseconds write_timeout{10000};
    /// After an answer that closes the connection, unread request bytes are drained for this
    /// long, so the client reads the answer before the close resets the connection.
    std::chrono::milliseconds linger_timeout{500};
    /// Requests answered on one connection before it is closed.
    unsigned max_requests_per_connection = 1000;
    /// Bytes of the bodies that only connections still writing them hold: those of
    /// representations whose newer answers have a newer body (clients that do not read pin
    /// them). The bodies being handed out now are not counted (the body callback keeps them
    /// anyway), and the last of the others is kept whatever its size.
    std::size_t max_held_bytes = std::size_t{32} << 20;
};

/// What server has done to stay within its limits, counted since it started.
struct server_stats {
    /// Connections closed to admit newer ones (max_connections).
    std::uint64_t closed_crowded = 0;
    /// Connections closed while writing a body no newer answer shares (max_held_bytes).
    std::uint64_t closed_held_bytes = 0;
};

class server {
  public:
    /// The entity of a 200 answer to the request `head` (GET or HEAD of the path), on the
    /// server's thread. An exception becomes a 500 answer.
    using body_fn = std::function<entity(const request_head& head)>;

    /// When a server starts answering: as soon as it listens, or at serve(). Connections made
    /// before serve() wait in the kernel's accept queue, so that a client that connects the
    /// moment the port opens gets what serve()'s caller made ready, not an empty answer.
    enum class start { listening, on_serve };

    /// Listens on `address` (port 0: a free one) and serves `path` (from `when`), whose 200
    /// answers carry `Vary: <vary>` (the request headers body_fn picks by; empty: none). Throws
    /// exporter_error naming the address and the reason when it cannot listen.
    server(const host_port& address,
           std::string path,
           std::string vary,
           body_fn body,
           limits options = {},
           start when = start::listening);
    /// Stops: closes every connection and the listening socket; the port is free on return.
    ~server();

    server(const server&) = delete;
    server& operator=(const server&) = delete;

    /// The address it listens on, with the port the system chose when 0 was asked.
    const host_port& bound() const noexcept { return bound_; }

    /// Starts answering a server made with start::on_serve; nothing otherwise.
    void serve();

    /// Read from any thread.
    server_stats stats() const noexcept;

  private:
    /// Defined in http/connection.hpp.
    struct connection;

    /// The body the latest 200 answer of one representation got.
    struct latest_body {
        std::string_view content_type;
        bool gzip = false;
        std::weak_ptr<const std::string> body;
    };

    // Listening and the loop: accepting, evicting, deadlines (server.cpp).
    void read_bound_port(const host_port& address);
    void open_event_loop(const host_port& address);
    /// Closes what the constructor opened and throws exporter_error naming `what` and errno.
    [[noreturn]] void give_up(const host_port& address, std::string_view what);
    void run() noexcept;
    void accept_ready();
    /// Stops watching the listening socket for a while: out of descriptors or memory.
    void pause_accepting(int err);
    /// Opens a connection on an accepted socket, and serves what already came on it.
    void adopt(int fd);
    void expire(std::chrono::steady_clock::time_point now);
    std::size_t open_connections() const noexcept;
    /// Closes one connection to bring the count back to max_connections; false when none may
    /// be closed yet (each waiting one is within its request_grace).
    bool make_room();
    connection* eviction_candidate(std::chrono::steady_clock::time_point now) const;
    /// Stops accepting until the first connection waiting for its request is out of its grace,
    /// or a connection closes.
    void pause_for_crowd(std::chrono::steady_clock::time_point now);
    int wait_timeout_ms(std::chrono::steady_clock::time_point now) const;

    // A connection's I/O (connection.cpp). The steps of drive return whether there is more to
    // do now; false when the connection waits for its socket or was closed.
    void drive(connection& c);
    bool read_request(connection& c);
    bool receive_head(connection& c);
    void answer(connection& c, const parse_result& r);
    std::string error_text(const parse_result& r, int status) const;
    /// Queues the answer to what parse_request_head found (or a 408) and its close decision:
    /// for a 200, the entity body_ picks for `request`; otherwise `text`.
    void respond(connection& c,
                 int status,
                 bool close,
                 bool head_only,
                 std::string_view text,
                 const request_head* request);
    /// Records the body a 200 answer got, then keeps the bodies that connections alone hold
    /// within max_held_bytes.
    void hold_body(connection& c, const entity& e);
    void limit_held_bytes();
    bool write_answer(connection& c);
    bool send_some(connection& c);
    void finish_answer(connection& c);
    bool linger(connection& c);
    void close_connection(connection& c) noexcept;
    void watch(connection& c, std::uint32_t events) noexcept;

    const std::string path_;
    const std::string vary_;
    const body_fn body_;
    const limits limits_;
    host_port bound_;
    int listen_fd_ = -1;
    int wake_fd_ = -1;
    int epoll_fd_ = -1;
    std::vector<std::unique_ptr<connection>> connections_;  // the server thread's only
    std::vector<latest_body> latest_;                       // the server thread's only
    std::chrono::steady_clock::time_point accept_resume_{};
    bool accepting_ = true;
    /// Accepting stopped by pause_for_crowd (it resumes early when a connection closes).
    bool crowd_paused_ = false;
    bool warned_crowd_ = false;
    bool warned_accept_ = false;
    bool warned_held_ = false;
    std::atomic<std::uint64_t> closed_crowded_{0};
    std::atomic<std::uint64_t> closed_held_bytes_{0};
    std::thread thread_;
};

}  // namespace xtel::http

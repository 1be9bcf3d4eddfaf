#pragma once
/// One client connection of server (private to src/http/): what server.cpp accepts, evicts
/// and expires, and connection.cpp reads, answers and closes.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "xtel/http/server.hpp"

namespace xtel::http {

struct server::connection {
    enum class phase { reading, writing, lingering };

    int fd = -1;
    phase state = phase::reading;
    /// The events epoll watches for.
    std::uint32_t events = 0;
    /// Received and not yet answered: part of a request head, or a head and what follows it.
    std::string in;
    /// Bytes that can change the verdict arrived since the last parse (see receive_head()).
    /// Parsing only then keeps a client that sends one byte at a time from costing a parse per
    /// byte.
    bool reparse = false;
    std::string head_out;
    /// The answer's body; null for HEAD (so that an answer without a body pins none).
    std::shared_ptr<const std::string> body_out;
    std::size_t body_bytes = 0;  // of body_out to send
    /// body_out is a 200 answer's body, shared with other answers (not an error text).
    bool shared_body = false;
    std::size_t sent = 0;
    std::size_t drained = 0;
    bool close_after = false;
    unsigned answered = 0;
    /// When the request being awaited began to be awaited: who has waited longest is evicted.
    std::chrono::steady_clock::time_point waiting_since;
    /// While writing: when the client last took some of the answer (or it began).
    std::chrono::steady_clock::time_point last_progress;
    std::chrono::steady_clock::time_point deadline;
};

}  // namespace xtel::http

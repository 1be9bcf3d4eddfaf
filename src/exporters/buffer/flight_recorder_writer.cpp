#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "core/owned_file.hpp"
#include "exporters/buffer/recorder_io.hpp"
#include "xtel/core/clock.hpp"
#include "xtel/core/config.hpp"
#include "xtel/core/parse.hpp"
#include "xtel/exporters/flight_recorder.hpp"

namespace xtel::flight_recorder {

namespace {

/// The staging buffer's slots. A recorder of at most this many (the default, 4096) is mirrored
/// whole in memory: a flush round's events are staged there and written once, at its end, so
/// events a later batch of the same round overwrites are never written (BM_transfer_tax/buffer
/// writes 16,384 events a round into 4,096 slots). A larger recorder is written batch by batch
/// through the buffer, at most this many slots per pwrite: with 256 BM_drain/buffer fell from
/// about 85 to 47 M events/s, with 4096 it is at about 60-75 (256 KiB per writer).
constexpr std::size_t staging_limit = 4096;

/// `<dir>/<agent_name>`; throws config_error unless the name can be a file name.
std::filesystem::path recorder_path(const std::filesystem::path& dir, std::string_view agent_name) {
    parse::file_name("agent name", agent_name);
    return dir / std::string(agent_name);
}

}  // namespace

writer::writer(const std::filesystem::path& dir, std::string_view agent_name, std::size_t capacity)
    : owned_file_writer(detail::file_kind, recorder_path(dir, agent_name)), capacity_(capacity) {
    if (capacity == 0) {
        throw exporter_error("flight recorder capacity must be at least 1 event");
    }

    // Allocated once here: append() allocates nothing.
    staging_slots_ = std::min<std::size_t>(capacity, staging_limit);
    staging_ = std::make_unique<slot[]>(staging_slots_);

    auto h = xtel::detail::new_owned_header<file_header>(detail::file_kind, agent_name);
    h.slot_size = slot_size;
    h.event_size = sizeof(event);
    h.capacity = capacity;
    create(agent_name, header_size + capacity * slot_size, std::as_bytes(std::span(&h, 1)));
}

writer::~writer() {
    commit();  // what a caller staged without committing (the pipeline commits every round)
}

bool writer::append(std::span<const event> events) noexcept {
    return stage(events) && commit();
}

bool writer::stage(std::span<const event> events) noexcept {
    if (failed()) {
        return false;
    }
    if (events.empty()) {
        return true;
    }
    if (staging_slots_ < capacity_) {
        return write_through(events);
    }
    // The staging buffer mirrors the whole ring: of more than a ring's worth staged before a
    // commit, only the last capacity events would survive in the file, so only those are kept.
    if (events.size() > capacity_) {
        const std::uint64_t skipped = events.size() - capacity_;
        staged_ += skipped;
        next_index_ = (next_index_ + skipped) % capacity_;
        events = events.last(capacity_);
    }
    std::uint64_t seq = next_ + staged_;
    staged_ += events.size();
    while (!events.empty()) {  // at most two runs: to the ring's end, then from its start
        const std::size_t run =
            std::min(events.size(), static_cast<std::size_t>(capacity_ - next_index_));
        slot* out = &staging_[next_index_];
        for (std::size_t i = 0; i < run; ++i) {
            out[i].seq = ++seq;
            out[i].ev = events[i];
        }
        events = events.subspan(run);
        next_index_ += run;
        if (next_index_ == capacity_) {
            next_index_ = 0;
        }
    }
    return true;
}

bool writer::commit() noexcept {
    if (staged_ == 0) {
        return !failed();
    }
    const std::uint64_t count = staged_;
    staged_ = 0;
    if (failed()) {
        return false;
    }
    // The slots changed since the last commit end at next_index_, and may wrap.
    return publish(next_ + count, [&](const xtel::detail::owned_writer& file) {
        const std::uint64_t dirty = std::min<std::uint64_t>(count, capacity_);
        const std::uint64_t first = (next_index_ + capacity_ - dirty) % capacity_;
        const std::uint64_t before_wrap = std::min(dirty, capacity_ - first);
        return file.write_at(&staging_[first], before_wrap * slot_size,
                             header_size + first * slot_size) &&
               (dirty == before_wrap ||
                file.write_at(&staging_[0], (dirty - before_wrap) * slot_size, header_size));
    });
}

bool writer::write_through(std::span<const event> events) noexcept {
    const std::uint64_t end = next_ + events.size();
    return publish(end, [&](const xtel::detail::owned_writer& file) {
        // Of more than a ring's worth, only the last capacity events would survive.
        std::uint64_t n = next_;
        std::uint64_t index = next_index_;
        if (events.size() > capacity_) {
            n = end - capacity_;
            index = n % capacity_;
            events = events.last(capacity_);
        }
        while (!events.empty()) {
            const std::size_t chunk = std::min(
                {events.size(), staging_slots_, static_cast<std::size_t>(capacity_ - index)});
            for (std::size_t i = 0; i < chunk; ++i) {
                staging_[i].seq = n + i + 1;
                staging_[i].ev = events[i];
            }
            if (!file.write_at(staging_.get(), chunk * slot_size,
                               header_size + index * slot_size)) {
                return false;
            }
            events = events.subspan(chunk);
            n += chunk;
            index += chunk;
            if (index == capacity_) {
                index = 0;
            }
        }
        next_index_ = index;
        return true;
    });
}

template <class WriteSlots>
bool writer::publish(std::uint64_t end, WriteSlots&& write_slots) noexcept {
    const xtel::detail::owned_writer file = owned();
    if (!file.intact(header_size + capacity_ * slot_size)) {
        return false;
    }
    // Claim, fill, publish: a reader that sees claim_seq C after copying a slot knows that
    // slots of events below C - capacity were not being rewritten (docs/buffer-format.md).
    if (!file.write_at(&end, sizeof end, offsetof(file_header, claim_seq)) || !write_slots(file)) {
        return false;
    }
    next_ = end;
    return file.write_at(&end, sizeof end, offsetof(file_header, write_seq));
}

}  // namespace xtel::flight_recorder

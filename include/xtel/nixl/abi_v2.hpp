#pragma once
/// NIXL's telemetry exporter plug-in ABI, version 2, as xtel declares it: the types that cross
/// between libnixl and a `libtelemetry_exporter_<name>.so` that NIXL loads for
/// NIXL_TELEMETRY_EXPORTER=<name>.
///
/// Written by xtel from NIXL's documented facts and checked against the binaries of the NIXL
/// that docs/nixl.md's version table lists (the vtable and typeinfo sizes of libnixl's own
/// exporters, the offsets its inlined calls read); NIXL installs no plug-in headers. One header
/// per ABI version, as NCCL asks of its profiler plug-ins: a change NIXL makes to any of these
/// layouts is a new header beside this one, never an edit of it. The names are xtel's; the
/// layouts, the vtable order and the enumerators' values are NIXL's and are what must match.
///
/// The ABI passes std::string and std::unique_ptr across: both sides must use libstdc++'s new
/// string ABI (_GLIBCXX_USE_CXX11_ABI=1, a 32-byte std::string), which NIXL's wheels are built
/// with (their symbols name std::__cxx11::basic_string). The static_asserts below hold this
/// header to those facts on the platform NIXL ships for, x86-64 and aarch64 Linux (LP64).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

namespace xtel::nixl::abi_v2 {

#if !defined(_GLIBCXX_USE_CXX11_ABI) || _GLIBCXX_USE_CXX11_ABI != 1
#error \
    "NIXL's plug-in ABI passes libstdc++'s new-ABI std::string: build with _GLIBCXX_USE_CXX11_ABI=1"
#endif

/// nixl_telemetry_plugin_api_version: the loader accepts a plug-in whose first member is v2.
enum class api_version : std::uint32_t { v2 = 2 };

/// nixl_status_t, an int-sized enum: what exportEvent returns. NIXL's flush ignores it; xtel
/// returns success, having counted anything it could not take.
enum class status : int { success = 0 };

/// nixl_telemetry_event_type_t: the kinds of NIXL's events, with NIXL's numbers.
enum class event_type : std::uint32_t {
    tx_bytes = 0,
    rx_bytes = 1,
    tx_requests_num = 2,  ///< 1 per completed transfer
    rx_requests_num = 3,
    memory_registered = 4,  ///< bytes of one registration
    memory_deregistered = 5,
    xfer_time = 6,       ///< microseconds, post to completion
    xfer_post_time = 7,  ///< microseconds, the post call itself
    // One per failed operation, by the nixl_status_t it failed with: NIXL_ERR_NOT_POSTED (-1)
    // is 8, and so on down to NIXL_ERR_NO_TELEMETRY (-12), 19.
    err_not_posted = 8,
    err_invalid_param = 9,
    err_backend = 10,
    err_not_found = 11,
    err_mismatch = 12,
    err_not_allowed = 13,
    err_repost_active = 14,
    err_unknown = 15,
    err_not_supported = 16,
    err_remote_disconnect = 17,
    err_canceled = 18,
    err_no_telemetry = 19,
    telemetry_events_dropped = 20,  ///< events NIXL's staging queue dropped since the last flush
};

inline constexpr std::uint32_t first_error_type = 8;
inline constexpr std::uint32_t last_error_type = 19;
inline constexpr std::uint32_t event_type_count = 21;

/// nixlTelemetryEvent: 16 bytes, no timestamp, agent, peer, backend or request.
struct event {
    event_type type;
    // 4 bytes of padding: value is 8-aligned.
    std::uint64_t value;
};

/// nixlTelemetryExporterInitParams: what the creator is given.
struct init_params {
    std::string agent_name;
    /// NIXL_TELEMETRY_BUFFER_SIZE.
    std::size_t max_events_buffered;
};

/// nixlTelemetryExporter: the base NIXL holds and calls through its vtable, in this order:
/// complete and deleting destructor, exportEvent, onBatchBegin, onBatchEnd. NIXL destroys it
/// through the deleting destructor of a std::unique_ptr<exporter>. The batch hooks are in 1.5.1
/// (checked: its flush calls them around every event of the flush, the dropped-events event
/// included) and not in 1.4, which never calls those slots, so an exporter that has them loads
/// in both. exportEvent may come outside a batch too.
class exporter {
  public:
    explicit exporter(const init_params& params) noexcept
        : max_events_buffered_(params.max_events_buffered) {}
    virtual ~exporter() = default;
    exporter(const exporter&) = delete;
    exporter& operator=(const exporter&) = delete;

    /// One event. NIXL's flush thread calls it; an exception out of it would end the process.
    virtual status export_event(const event& e) = 0;

    /// Read inline by NIXL (getMaxEventsBuffered): its offset, 8, is ABI.
    std::size_t max_events_buffered() const noexcept { return max_events_buffered_; }

  private:
    /// Called by NIXL only (private, as NIXL declares them): before and after each flush.
    virtual void on_batch_begin() noexcept {}
    virtual void on_batch_end() noexcept {}

    // Derived classes reach them through these, which NIXL's vtable never names.
    friend class exporter_access;

    const std::size_t max_events_buffered_;
};

/// The batch hooks as a derived class overrides them: `private` in the base keeps them NIXL's to
/// call, and a derived class still overrides a private virtual (it cannot call the base's).
/// exporter_access lets tests call them as NIXL does.
class exporter_access {
  public:
    static void begin(exporter& e) noexcept { e.on_batch_begin(); }
    static void end(exporter& e) noexcept { e.on_batch_end(); }
};

/// exporter_creator_fn_t: returns the exporter by value (a std::unique_ptr, returned through a
/// hidden pointer). NIXL throws out of nixlAgent's constructor when it returns null or throws.
using creator_fn = std::unique_ptr<exporter> (*)(const init_params& params);

/// nixlTelemetryPlugin: what nixl_telemetry_plugin_init returns, valid until the library is
/// unloaded (NIXL opens it RTLD_NODELETE, so never). NIXL reads version_ as a C string.
struct plugin {
    api_version api;
    creator_fn create_exporter;
    std::string name;
    std::string version;
};

/// The entry points NIXL looks up with dlsym; fini is optional.
inline constexpr const char* init_symbol = "nixl_telemetry_plugin_init";
inline constexpr const char* fini_symbol = "nixl_telemetry_plugin_fini";
using init_fn = plugin* (*)();
using fini_fn = void (*)();

// The layouts NIXL reads, as its binaries show them.
static_assert(sizeof(std::string) == 32, "libstdc++'s new-ABI std::string is 32 bytes");
static_assert(sizeof(event) == 16 && alignof(event) == 8);
static_assert(offsetof(event, type) == 0 && offsetof(event, value) == 8);
static_assert(std::is_trivially_copyable_v<event> && std::is_standard_layout_v<event>);
static_assert(sizeof(event_type) == 4 && sizeof(status) == 4);
static_assert(sizeof(init_params) == 40 && offsetof(init_params, max_events_buffered) == 32);
static_assert(sizeof(plugin) == 80);
static_assert(offsetof(plugin, api) == 0 && offsetof(plugin, create_exporter) == 8);
static_assert(offsetof(plugin, name) == 16 && offsetof(plugin, version) == 48);
static_assert(sizeof(std::unique_ptr<exporter>) == sizeof(void*));
// The vtable pointer, then max_events_buffered_: a derived class's data starts at 16.
static_assert(sizeof(exporter) == 16 && std::is_polymorphic_v<exporter>);

}  // namespace xtel::nixl::abi_v2

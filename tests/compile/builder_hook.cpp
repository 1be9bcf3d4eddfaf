// A metrics builder whose setup has the wrong form must not compile (xtel/metrics/builder.hpp):
// built with XTEL_WRONG_HOOK by tests/cmake/compile.cmake, which expects the message. Without
// it the builder is right and the file compiles.

#include "xtel/metrics/builder.hpp"

using xtel::metrics::attribute_registry;
using xtel::metrics::metric_store;

struct checked_builder {
    void build(const xtel::metrics::transfer_group&, metric_store&) {}
#if defined(XTEL_WRONG_HOOK)
    void setup(metric_store&) {}
#else
    void setup(metric_store&, const attribute_registry&) {}
#endif
};

void set_up(checked_builder& b, metric_store& store, const attribute_registry& registry) {
    xtel::metrics::builder_traits<checked_builder>::setup(b, store, registry);
}

#include "xtel/http/metrics_body.hpp"

#include <utility>

#include "xtel/http/gzip.hpp"
#include "xtel/metrics/exposition.hpp"

namespace xtel::http {

metrics_body::metrics_body(int gzip_level, left_out_fn on_left_out)
    : gzip_level_(gzip_level), on_left_out_(std::move(on_left_out)) {}

bool metrics_body::show(snapshots from) {
    if (from == shown_) {
        return false;
    }
    shown_ = std::move(from);
    kept_.fill(nullptr);
    return true;
}

std::shared_ptr<const std::string> metrics_body::body(representation r) {
    const std::size_t i = index_of(r);
    if (kept_[i]) {
        return kept_[i];
    }
    std::shared_ptr<std::string> out;
    if (r.gzip) {
        const auto plain = body({r.format, false});
        out = std::make_shared<std::string>(gzip(*plain, gzip_level_));
        ++compressions_;
    } else {
        out = std::make_shared<std::string>();
        out->reserve(last_size_[i] + 256);
        const std::size_t left_out = metrics::render(shown_, *out, r.format);
        ++renderings_;
        if (left_out > 0 && on_left_out_) {
            on_left_out_(left_out);
        }
    }
    last_size_[i] = out->size();
    kept_[i] = std::move(out);
    return kept_[i];
}

entity metrics_body::answer(representation r) {
    return entity{body(r), content_type(r.format), r.gzip};
}

}  // namespace xtel::http

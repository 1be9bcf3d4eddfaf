#pragma once
/// `--allow-uid UID|NAME[,...]`, the owners whose node files xtel-exporter and `xtel top` serve
/// besides the uid they run as (private to src/).

#include <sys/types.h>

#include <string_view>
#include <vector>

namespace xtel::node {

/// The uids `value` names, comma-separated: decimal uids as given (an account need not exist
/// for one: a container's runAsUser often has none), names resolved now with getpwnam_r.
/// Throws config_error naming `option` and quoting `value`: an empty item, a name no account
/// has, a uid out of range.
std::vector<uid_t> parse_allowed_uids(std::string_view option, std::string_view value);

}  // namespace xtel::node

#pragma once
/// Kept for the sources that include it by this name: the event names are in xtel/names.hpp.

#include "xtel/names.hpp"

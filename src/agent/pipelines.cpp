// Every agent xtel hands out, compiled once: the agent over each mask's pipeline
// (xtel/agent/basic_agent.hpp declares them extern; the pipelines themselves are compiled in
// src/registry/pipelines.cpp, without UCX). Generated from the list of built-in exporters;
// nothing here changes when one is added.

#include "xtel/agent/basic_agent.hpp"

namespace xtel {

#define XTEL_INSTANTIATE_AGENT(mask) template class basic_agent<pipeline_t<mask>>;
XTEL_FOR_EACH_PIPELINE_MASK(XTEL_INSTANTIATE_AGENT)
#undef XTEL_INSTANTIATE_AGENT

}  // namespace xtel

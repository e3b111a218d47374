#pragma once
// The annotation header a library author ships next to vecmath.hpp: each
// function's CPU version, its device equivalent and how its arguments split.
// Calls through vecmath::oa record into oa's task graph and return lazies.

#include <oa/oa.hpp>
#include <vector>

#include "vecmath.hpp"

namespace vecmath::oa {
using ::oa::split::contiguous;

inline constexpr auto add = ::oa::annotate<"vecmath::add">(
    ::oa::cpu(&vecmath::add),
    ::oa::args(::oa::in<contiguous>("a"), ::oa::in<contiguous>("b"), ::oa::out<contiguous, std::vector<double>>("out")),
    ::oa::device_fn(::oa::elementwise(::oa::ops::add{})));

inline constexpr auto mul = ::oa::annotate<"vecmath::mul">(
    ::oa::cpu(&vecmath::mul),
    ::oa::args(::oa::in<contiguous>("a"), ::oa::in<contiguous>("b"), ::oa::out<contiguous, std::vector<double>>("out")),
    ::oa::device_fn(::oa::elementwise(::oa::ops::mul{})));

inline constexpr auto scale = ::oa::annotate<"vecmath::scale">(
    ::oa::cpu(&vecmath::scale), ::oa::args(::oa::mut<contiguous>("x"), ::oa::scalar<double>("k")),
    ::oa::device_fn(::oa::elementwise(::oa::ops::mul{})));

// No device equivalent: stages with it run on the host.
inline constexpr auto checked_sqrt = ::oa::annotate<"vecmath::checked_sqrt">(
    ::oa::cpu(&vecmath::checked_sqrt),
    ::oa::args(::oa::in<contiguous>("a"), ::oa::out<contiguous, std::vector<double>>("out")));

inline constexpr auto dot = ::oa::annotate<"vecmath::dot">(
    ::oa::cpu(&vecmath::dot),
    ::oa::args(::oa::in<contiguous>("a"), ::oa::in<contiguous>("b"), ::oa::ret<::oa::split::sum, double>),
    ::oa::device_fn(::oa::elementwise(::oa::ops::mul{})), ::oa::cost(2.0));

}  // namespace vecmath::oa

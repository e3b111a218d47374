#pragma once
// Values every chunk sees whole: scalars and small objects. They are captured
// by value when the call is made, so a later change to the caller's variable
// does not reach a call already recorded.

#include <type_traits>

#include "oa/split_types/split.hpp"

namespace oa::split {

struct broadcast {
  static constexpr split_kind kind = split_kind::broadcast;
  static constexpr const char* name = "broadcast";
  template <class T>
  static constexpr bool accepts = std::is_copy_constructible_v<std::remove_cvref_t<T>>;
};

}  // namespace oa::split

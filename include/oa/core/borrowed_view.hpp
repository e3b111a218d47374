#pragma once
// Which types only view storage that others own.

#include <cstddef>
#include <span>

namespace oa {

/// Whether a T only views storage that others own (std::span). A temporary
/// one given to an annotated call is bound as that storage, not as a value of
/// its own: the call reads it after, and a mut argument's call updates it
/// before, every other call over the same elements, as a named one would be.
/// A library whose split type splits a view type of its own specializes it.
template <class T>
inline constexpr bool borrowed_view = false;
template <class E, std::size_t X>
inline constexpr bool borrowed_view<std::span<E, X>> = true;

}  // namespace oa

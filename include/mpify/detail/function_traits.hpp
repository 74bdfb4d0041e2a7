#pragma once
// Compile-time facts about a function that is to run on other processes.
#include <tuple>
#include <type_traits>

#include <mpify/abi.hpp>

MPIFY_BEGIN_NAMESPACE
namespace detail {

/// Result and parameter types of a function pointer type, as they travel.
template <class F>
struct function_traits;

template <class R, class... P>
struct function_traits<R (*)(P...)> {
    using result = std::decay_t<R>;
    /// What travels: each parameter by value (a worker has its own copy anyway).
    using params = std::tuple<std::decay_t<P>...>;
    static constexpr bool has_mutable_reference_param =
        (... || (std::is_lvalue_reference_v<P> && !std::is_const_v<std::remove_reference_t<P>>));
};

template <class R, class... P>
struct function_traits<R (*)(P...) noexcept> : function_traits<R (*)(P...)> {};

/// Rejects, at compile time, what cannot travel to another process.
template <class F>
constexpr void check_shippable() {
    using traits = function_traits<F>;
    static_assert(!traits::has_mutable_reference_param,
                  "mpify: a function run on other processes cannot take a non-const lvalue "
                  "reference: a worker's changes would never reach the caller. Take the value "
                  "(or a const reference) and return what changed.");
    static_assert(!std::is_pointer_v<typename traits::result>,
                  "mpify: a function run on other processes cannot return a pointer: it would "
                  "point into a process that has exited. Return the value.");
}

}  // namespace detail
MPIFY_END_NAMESPACE

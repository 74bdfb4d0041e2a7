#pragma once
// Whole numbers from environment variables, parsed one way everywhere. What a malformed
// value does is chosen per variable, where it is read, and said there.
namespace mpify::detail {

/// What a variable that is set but is not a whole number (or does not fit) leads to.
enum class Malformed {
    use_fallback,  ///< treated as unset: for queries that must not throw
    reject,        ///< a UsageError naming the variable, its value and `who` reads it
};

/// The whole number in environment variable `name`; `fallback` when it is unset or empty.
long long environment_number(const char* name, long long fallback, Malformed on_malformed,
                             const char* who = "mpify");

}  // namespace mpify::detail

#pragma once
// Whole numbers from environment variables, parsed one way everywhere. What a malformed
// value does is chosen per variable, where it is read, and said there.
#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

/// What a variable that is set but is not a whole number in its range leads to.
enum class Malformed {
    use_fallback,  ///< treated as unset: for queries that must not throw
    reject,        ///< a UsageError naming the variable, its value and `who` reads it
};

/// The whole number in environment variable `name`, from `smallest` to `largest`;
/// `fallback` when it is unset or empty. A number outside the range is malformed, never
/// cut to fit (RANK=4294967296 is no rank 0).
long long environment_number(const char* name, long long fallback, Malformed on_malformed, const char* who,
                             long long smallest, long long largest);
/// The same for `text`, variable `name`'s value read elsewhere (null: unset).
long long whole_number_of(const char* name, const char* text, long long fallback, Malformed on_malformed,
                          const char* who, long long smallest, long long largest);

MPIFY_END_DETAIL_NAMESPACE

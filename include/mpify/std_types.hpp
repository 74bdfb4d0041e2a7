#pragma once
// Boost.Serialization for the standard types mpify users pass around. Boost 1.74 covers
// the containers (included here so users need no Boost include of their own) but not
// std::tuple, std::optional or std::variant: this header adds those three. Boost 1.84
// serializes std::optional and std::variant itself (optional.hpp, variant.hpp): from
// that version on, its headers are included instead of our definitions, which would
// redefine its templates.
#include <boost/version.hpp>
#include <boost/serialization/array.hpp>
#include <boost/serialization/deque.hpp>
#include <boost/serialization/list.hpp>
#include <boost/serialization/map.hpp>
#include <boost/serialization/set.hpp>
#include <boost/serialization/split_free.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/unordered_map.hpp>
#include <boost/serialization/unordered_set.hpp>
#include <boost/serialization/utility.hpp>
#include <boost/serialization/vector.hpp>
#if BOOST_VERSION >= 108400
#include <boost/serialization/optional.hpp>
#include <boost/serialization/variant.hpp>
#endif

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <variant>

namespace boost {
namespace serialization {

/// std::tuple: its elements in order.
template <class Archive, class... T>
void serialize(Archive& ar, std::tuple<T...>& tuple, const unsigned int /*version*/) {
    std::apply([&ar](auto&... element) { (ar & ... & element); }, tuple);
}

#if BOOST_VERSION < 108400
/// std::optional: a presence flag, then the value if there is one.
/// The flag is a byte, 0 or 1, checked when read: read into a bool, any other byte of a
/// damaged archive would be a bool that is neither true nor false.
template <class Archive, class T>
void save(Archive& ar, const std::optional<T>& value, const unsigned int /*version*/) {
    const std::uint8_t present = value.has_value() ? 1 : 0;
    ar << present;
    if (present) ar << *value;
}

template <class Archive, class T>
void load(Archive& ar, std::optional<T>& value, const unsigned int /*version*/) {
    std::uint8_t present = 0;
    ar >> present;
    if (present > 1) throw std::runtime_error("mpify: std::optional's presence flag in the archive is neither 0 nor 1");
    if (present == 0) {
        value.reset();
        return;
    }
    if (!value) value.emplace();
    ar >> *value;
}

/// Boost's entry point for std::optional: dispatches to save or load.
template <class Archive, class T>
void serialize(Archive& ar, std::optional<T>& value, const unsigned int version) {
    split_free(ar, value, version);
}

namespace mpify_detail {
/// Reads alternative number `index` of the variant (found by recursion over the types).
template <class Archive, class Variant, std::size_t I = 0>
void load_alternative(Archive& ar, Variant& value, std::size_t index) {
    if constexpr (I < std::variant_size_v<Variant>) {
        if (index == I) {
            std::variant_alternative_t<I, Variant> alternative{};
            ar >> alternative;
            value.template emplace<I>(std::move(alternative));
            return;
        }
        load_alternative<Archive, Variant, I + 1>(ar, value, index);
    } else {
        throw std::runtime_error("mpify: std::variant index out of range in the archive");
    }
}
}  // namespace mpify_detail

/// std::variant: the index of the held alternative, then its value.
template <class Archive, class... T>
void save(Archive& ar, const std::variant<T...>& value, const unsigned int /*version*/) {
    const std::size_t index = value.index();
    ar << index;
    std::visit([&ar](const auto& alternative) { ar << alternative; }, value);
}

template <class Archive, class... T>
void load(Archive& ar, std::variant<T...>& value, const unsigned int /*version*/) {
    std::size_t index = 0;
    ar >> index;
    mpify_detail::load_alternative(ar, value, index);
}

/// Boost's entry point for std::variant: dispatches to save or load.
template <class Archive, class... T>
void serialize(Archive& ar, std::variant<T...>& value, const unsigned int version) {
    split_free(ar, value, version);
}
#endif  // BOOST_VERSION < 108400

}  // namespace serialization
}  // namespace boost

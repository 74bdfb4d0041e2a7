#include "store/member.hpp"

#include "store/message.hpp"

#include <fmt/format.h>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace store {
namespace {

constexpr std::size_t fields_per_member = 5;

int small_number(const std::string& text) {
    std::size_t used = 0;
    int value = 0;
    try {
        value = std::stoi(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used == 0 || used != text.size()) throw MalformedMessage(fmt::format("'{}' is not a number", text));
    return value;
}

}  // namespace

const char* state_name(Member::State state) {
    switch (state) {
        case Member::State::present: return "present";
        case Member::State::left: return "left";
        case Member::State::failed: return "failed";
        case Member::State::gone: return "gone";
    }
    return "?";
}

std::vector<std::string> encode_members(const std::vector<Member>& members) {
    std::vector<std::string> fields;
    for (const Member& m : members) {
        fields.push_back(std::to_string(m.number));
        fields.push_back(std::to_string(m.local_ranks));
        fields.push_back(m.host);
        fields.push_back(state_name(m.state));
        fields.push_back(m.note);
    }
    return fields;
}

std::vector<Member> decode_members(const std::vector<std::string>& fields) {
    if (fields.size() % fields_per_member != 0)
        throw MalformedMessage(fmt::format("{} fields do not make whole members", fields.size()));
    std::vector<Member> members;
    for (std::size_t i = 0; i < fields.size(); i += fields_per_member) {
        Member m;
        m.number = small_number(fields[i]);
        m.local_ranks = small_number(fields[i + 1]);
        m.host = fields[i + 2];
        bool known = false;
        for (auto s : {Member::State::present, Member::State::left, Member::State::failed, Member::State::gone})
            if (fields[i + 3] == state_name(s)) {
                m.state = s;
                known = true;
            }
        if (!known) throw MalformedMessage(fmt::format("unknown member state '{}'", fields[i + 3]));
        m.note = fields[i + 4];
        members.push_back(std::move(m));
    }
    return members;
}

}  // namespace store
MPIFY_END_DETAIL_NAMESPACE

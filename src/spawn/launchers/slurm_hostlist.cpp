#include "spawn/launchers/slurm_hostlist.hpp"

#include <mpify/error.hpp>

#include <fmt/format.h>

#include <cctype>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

[[noreturn]] void refuse(const std::string& list, const std::string& why) {
    throw UsageError(fmt::format("mpify: the Slurm host list '{}' {}", list, why));
}

unsigned long long number(const std::string& list, const std::string& digits) {
    if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos)
        refuse(list, fmt::format("has '{}' where a number belongs", digits));
    return std::stoull(digits);
}

// The texts a bracket's inside stands for: "01-03,7" -> 01 02 03 7.
std::vector<std::string> bracket_values(const std::string& list, const std::string& inside) {
    std::vector<std::string> values;
    std::size_t start = 0;
    for (;;) {
        const std::size_t comma = inside.find(',', start);
        const std::string item = inside.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        const std::size_t dash = item.find('-');
        const std::string first = item.substr(0, dash);
        const unsigned long long low = number(list, first);
        const unsigned long long high = dash == std::string::npos ? low : number(list, item.substr(dash + 1));
        if (high < low) refuse(list, fmt::format("has the range {} that runs backwards", item));
        if (high - low >= max_hostlist_hosts) refuse(list, fmt::format("has more than {} hosts", max_hostlist_hosts));
        const std::size_t width = first.size() > 1 && first[0] == '0' ? first.size() : 0;  // leading zeros kept
        for (unsigned long long v = low; v <= high; ++v) {
            values.push_back(fmt::format("{:0{}}", v, width));
            if (values.size() > max_hostlist_hosts)
                refuse(list, fmt::format("has more than {} hosts", max_hostlist_hosts));
        }
        if (comma == std::string::npos) return values;
        start = comma + 1;
    }
}

// One name with any number of bracket groups: "rack[1-2]-n[01-02]". `characters`
// counts the characters of every host so far, against max_hostlist_characters.
void expand_name(const std::string& list, const std::string& name, std::vector<std::string>& hosts,
                 std::size_t& characters) {
    std::vector<std::string> partial{""};
    for (std::size_t at = 0; at < name.size();) {
        const std::size_t open = name.find('[', at);
        const std::string literal = name.substr(at, open == std::string::npos ? std::string::npos : open - at);
        if (literal.find(']') != std::string::npos) refuse(list, "has a ']' without its '['");
        for (std::string& p : partial) p += literal;
        if (open == std::string::npos) break;
        const std::size_t close = name.find(']', open);
        if (close == std::string::npos) refuse(list, "has a '[' without its ']'");
        const std::vector<std::string> values = bracket_values(list, name.substr(open + 1, close - open - 1));
        if (partial.size() * values.size() > max_hostlist_hosts)
            refuse(list, fmt::format("has more than {} hosts", max_hostlist_hosts));
        std::vector<std::string> next;
        next.reserve(partial.size() * values.size());
        std::size_t next_characters = 0;
        for (const std::string& p : partial)
            for (const std::string& v : values) {
                next_characters += p.size() + v.size();
                if (characters + next_characters > max_hostlist_characters)
                    refuse(list, fmt::format("expands to more than {} characters", max_hostlist_characters));
                next.push_back(p + v);
            }
        partial = std::move(next);
        at = close + 1;
    }
    if (hosts.size() + partial.size() > max_hostlist_hosts)
        refuse(list, fmt::format("has more than {} hosts", max_hostlist_hosts));
    for (std::string& p : partial) {
        characters += p.size();
        if (characters > max_hostlist_characters)
            refuse(list, fmt::format("expands to more than {} characters", max_hostlist_characters));
        hosts.push_back(std::move(p));
    }
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& list) {
    std::vector<std::string> hosts;
    std::size_t characters = 0;
    int depth = 0;
    std::string name;
    for (char c : list + ",") {
        if (c == '[') ++depth;
        if (c == ']') --depth;
        if (depth < 0 || depth > 1) refuse(list, "has unbalanced brackets");
        if (c == ',' && depth == 0) {
            if (!name.empty()) expand_name(list, name, hosts, characters);
            name.clear();
        } else if (!std::isspace(static_cast<unsigned char>(c))) {
            name += c;
        }
    }
    if (depth != 0) refuse(list, "has a '[' without its ']'");
    if (hosts.empty()) refuse(list, "names no host");
    return hosts;
}

MPIFY_END_DETAIL_NAMESPACE

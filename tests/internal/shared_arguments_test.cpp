// Large arguments' memfd (wire/shared_arguments.hpp): a call's arguments spill into it
// as they are written; the process keeps it from one call to the next and rewrites it,
// gives back what much smaller arguments leave unused, and keeps nothing when
// MPIFY_KEEP_SHARED_ARGUMENTS=0.
#include "common/scoped_environment.hpp"
#include "wire/shared_arguments.hpp"

#include <mpify/detail/blob.hpp>
#include <mpify/std_types.hpp>
#include <mpify/tensor.hpp>

#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

using mpify::detail::MappedArguments;
using mpify::detail::SharedArguments;

namespace {

struct stat file_status(int fd) {
    struct stat status{};
    REQUIRE(::fstat(fd, &status) == 0);
    return status;
}

// What a worker would read: a mapping of the memfd's first size() bytes.
std::string read_as_a_worker(const SharedArguments& shared) {
    const MappedArguments mapped(::dup(shared.fd()), shared.size());
    return std::string(mapped.bytes());
}

// MPIFY_KEEP_SHARED_ARGUMENTS set to `value` for a scope.
mpify::detail::ScopedEnvironment keeping(const char* value) {
    return mpify::detail::ScopedEnvironment({{std::string(mpify::detail::keep_shared_arguments_var), value}});
}

// The file of the memfd that held `bytes` for a call that has ended.
ino_t file_of_an_ended_call(const std::string& bytes) {
    const SharedArguments shared(bytes);
    REQUIRE(shared.fd() >= 0);
    return file_status(shared.fd()).st_ino;
}

}  // namespace

TEST_CASE("the arguments' memfd is kept for the next call and rewritten by it", "[shared_arguments]") {
    const auto keep = keeping("1");
    ino_t first_file = 0;
    {
        const SharedArguments first(std::string(3u << 20, 'a'));
        REQUIRE(first.fd() >= 0);
        first_file = file_status(first.fd()).st_ino;
        CHECK(read_as_a_worker(first) == std::string(3u << 20, 'a'));
    }
    const std::string second_bytes = std::string(2u << 20, 'b') + "end";
    const SharedArguments second(second_bytes);
    REQUIRE(second.fd() >= 0);
    CHECK(file_status(second.fd()).st_ino == first_file);
    CHECK(second.size() == second_bytes.size());
    CHECK(read_as_a_worker(second) == second_bytes);
    // The file keeps the 3 MiB written before: these arguments are not much smaller.
    CHECK(static_cast<std::size_t>(file_status(second.fd()).st_size) >= 3u << 20);

    SECTION("a call while the memfd is in use gets a memfd of its own") {
        const SharedArguments third(std::string(1u << 20, 'c'));
        REQUIRE(third.fd() >= 0);
        CHECK(file_status(third.fd()).st_ino != first_file);
    }
}

TEST_CASE("a child forked from the process does not write the memfd its parent keeps", "[shared_arguments]") {
    const auto keep = keeping("1");
    const ino_t parents_file = file_of_an_ended_call(std::string(1u << 20, 'p'));
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {  // no Catch here: the answer is the exit status
        const SharedArguments childs(std::string(1u << 20, 'c'));
        const bool own_file = childs.fd() >= 0 && file_status(childs.fd()).st_ino != parents_file;
        ::_exit(own_file ? 0 : 1);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    // The parent still takes the memfd it kept.
    const SharedArguments parents_again(std::string(1u << 20, 'q'));
    CHECK(file_status(parents_again.fd()).st_ino == parents_file);
}

TEST_CASE("much smaller arguments give back the memfd's pages they leave unused", "[shared_arguments]") {
    const auto keep = keeping("1");
    {
        const SharedArguments large(std::string(8u << 20, 'a'));
    }
    const SharedArguments small(std::string(1u << 20, 'b'));
    REQUIRE(small.fd() >= 0);
    CHECK(static_cast<std::size_t>(file_status(small.fd()).st_size) == 1u << 20);
    CHECK(read_as_a_worker(small) == std::string(1u << 20, 'b'));
}

TEST_CASE("MPIFY_KEEP_SHARED_ARGUMENTS=0: every call's memfd is freed after it", "[shared_arguments]") {
    const auto keep = keeping("0");
    const ino_t first_file = file_of_an_ended_call(std::string(1u << 20, 'a'));
    const SharedArguments second(std::string(1u << 20, 'b'));
    REQUIRE(second.fd() >= 0);
    CHECK(file_status(second.fd()).st_ino != first_file);
}

TEST_CASE("a call's arguments spill into shared memory as they are written, byte for byte what to_blob writes",
          "[shared_arguments]") {
    using mpify::detail::to_arguments_blob;
    using mpify::detail::to_blob;
    // Many small writes (the strings), then one large one (the tensor's elements).
    const std::vector<std::string> names(20000, std::string(100, 'n'));
    const at::Tensor tensor = at::arange(std::int64_t(1) << 20, at::kFloat);
    const std::string whole = to_blob(std::string("head"), names, tensor);

    std::shared_ptr<SharedArguments> shared;
    SECTION("at least spill_at bytes: all in shared memory") {
        const std::string left = to_arguments_blob(std::size_t(1) << 20, shared, std::string("head"), names, tensor);
        CHECK(left.empty());
        REQUIRE(shared != nullptr);
        REQUIRE(shared->size() == whole.size());
        const std::string spilled = read_as_a_worker(*shared);
        CHECK((spilled == whole));
        std::string head;
        std::vector<std::string> names_back;
        at::Tensor tensor_back;
        mpify::detail::from_blob(spilled, head, names_back, tensor_back);
        CHECK(names_back == names);
        CHECK(tensor_back.equal(tensor));
    }
    SECTION("fewer bytes: all in the string") {
        const std::string left = to_arguments_blob(whole.size() + 1, shared, std::string("head"), names, tensor);
        CHECK(shared == nullptr);
        CHECK((left == whole));
    }
}

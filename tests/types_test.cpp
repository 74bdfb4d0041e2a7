// Arguments and results: what Boost.Serialization handles arrives intact, both ways.
#include "functions.hpp"
#include "tensor_functions.hpp"

#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <boost/serialization/split_member.hpp>
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

namespace {
mpify::Options one_worker() {
    mpify::Options options;
    options.caller_rank = std::nullopt;  // rank 0 is a worker: everything crosses the channel
    return options;
}

// A float CPU tensor written as a CUDA tensor is (include/mpify/tensor.hpp's save, with
// the CUDA flag set), read back as the at::Tensor it stands for: what a caller on a GPU
// sends, from a machine without one.
struct SentAsCuda {
    at::Tensor tensor;

    template <class Archive>
    void save(Archive& ar, const unsigned int) const {
        using mpify::detail::tensor_alignment;
        const bool defined = true, requires_grad = false, cuda = true;
        const auto dtype = static_cast<std::int8_t>(at::kFloat);
        const std::vector<std::int64_t> sizes = tensor.sizes().vec();
        ar << defined << dtype << sizes << requires_grad << cuda;
        const std::size_t elements_at = mpify::detail::blob_write_offset() + 1;
        const auto padding =
            static_cast<std::uint8_t>((tensor_alignment - elements_at % tensor_alignment) % tensor_alignment);
        ar << padding;
        if (padding > 0) ar << boost::serialization::make_binary_object(mpify::detail::tensor_padding_bytes, padding);
        const at::Tensor values = tensor.to(at::kFloat).contiguous();
        ar << boost::serialization::make_binary_object(values.data_ptr(), values.nbytes());
    }
    template <class Archive>
    void load(Archive& ar, const unsigned int) {
        ar >> tensor;
    }
    BOOST_SERIALIZATION_SPLIT_MEMBER()
};

double sum_of_sent_as_cuda(SentAsCuda sent) { return sent.tensor.sum().item<double>(); }
MPIFY_REGISTER(sum_of_sent_as_cuda);
}  // namespace

TEST_CASE("strings vectors maps pairs optionals tuples and variants arrive intact", "[types]") {
    const std::string text("with\0nul and ünïcode", 21);
    CHECK(mpify::ranch(one_worker(), 1, in_program::echo_string, text).front() == text);
    CHECK(mpify::ranch(one_worker(), 1, in_program::echo_string, std::string()).front().empty());

    const std::vector<double> doubles{1.5, -0.0, 1e300, 3.25};
    CHECK(mpify::ranch(one_worker(), 1, in_library::echo_doubles, doubles).front() == doubles);

    const mpify_test::Nested nested{{"a", {{1, std::nullopt}, {2, "two"}}}, {"", {}}};
    // (( )): Catch cannot print these types, so compare without decomposing
    CHECK((mpify::ranch(one_worker(), 1, in_library::echo_nested, nested).front() == nested));

    const mpify_test::Mixed with_string{7, "seven", std::string("variant string"), 0.5};
    const mpify_test::Mixed with_int{-1, "", 99, std::nullopt};
    CHECK((mpify::ranch(one_worker(), 1, in_program::echo_mixed, with_string).front() == with_string));
    CHECK((mpify::ranch(one_worker(), 1, in_program::echo_mixed, with_int).front() == with_int));
}

TEST_CASE("a user struct with serialize() arrives intact", "[types]") {
    const auto reports = mpify::ranch(one_worker(), 2, in_library::report_args, "x", -5, "z");
    CHECK(reports[1].args == std::vector<std::string>{"x", "-5", "z"});
}

TEST_CASE("a 64 MiB argument reaches every worker whole", "[types]") {
    std::string blob(64u << 20, 'x');
    blob.back() = 'y';
    mpify::Options options;
    SECTION("in shared memory") {}
    SECTION("through each worker's channel") { options.shared_memory_threshold = SIZE_MAX; }
    const auto sizes = mpify::ranch(options, 3, in_program::byte_count, blob);
    CHECK(sizes == std::vector<std::size_t>(3, blob.size()));
}

TEST_CASE("large arguments of calls one after another each arrive as that call wrote them", "[types]") {
    // The process keeps the arguments' memfd from call to call: each call rewrites it,
    // larger (it grows), much smaller (it shrinks) or a little smaller (the file stays
    // longer than the arguments).
    mpify::Options options;
    options.caller_rank = std::nullopt;  // three workers
    for (const auto& [mib, fill] : {std::pair{4u, 'a'}, {8u, 'b'}, {2u, 'c'}, {3u, 'd'}, {2u, 'e'}}) {
        std::string blob(mib << 20, fill);
        blob.front() = blob.back() = static_cast<char>(fill + 1);
        INFO(mib << " MiB of '" << fill << "'");
        const auto echoed = mpify::ranch(options, 3, in_program::echo_string, blob);
        REQUIRE(echoed.size() == 3);
        for (const std::string& back : echoed) CHECK((back == blob));
    }
}

TEST_CASE("a 256 MiB tensor argument to n = 3 arrives intact in every worker", "[types][tensor]") {
    const std::int64_t elements = std::int64_t(64) << 20;  // int32: 256 MiB
    mpify::Options options;
    options.caller_rank = std::nullopt;  // three workers
    const auto intact = mpify::ranch(options, 3, in_library::is_arange, at::arange(elements, at::kInt), elements);
    CHECK(intact == std::vector<bool>(3, true));
}

TEST_CASE("a large tensor argument is used where shared memory holds it, and each rank's writes stay its own",
          "[types][tensor]") {
    const std::int64_t elements = std::int64_t(1) << 20;  // int64: 8 MiB
    const at::Tensor base = at::arange(elements, at::kLong);
    const std::int64_t base_sum = elements * (elements - 1) / 2;
    mpify::Options options;
    options.caller_rank = std::nullopt;  // three workers
    bool shared = true;
    SECTION("in shared memory: in place") {}
    SECTION("through each worker's channel: a copy") {
        options.shared_memory_threshold = SIZE_MAX;
        shared = false;
    }
    const auto uses = mpify::ranch(options, 3, in_library::use_argument, base);
    REQUIRE(uses.size() == 3);
    for (std::size_t rank = 0; rank < 3; ++rank) {
        INFO("rank " << rank << ", elements in " << uses[rank].mapping);
        CHECK(uses[rank].sum_after_write == base_sum + static_cast<std::int64_t>(rank) * elements);
        CHECK((uses[rank].mapping.find("memfd:mpify-arguments") != std::string::npos) == shared);
    }
    CHECK(base.sum().item<std::int64_t>() == base_sum);  // the caller's tensor is as it was
}

TEST_CASE("tensors of any dtype and shape arrive equal", "[types][tensor]") {
    std::vector<at::Tensor> tensors{
        at::randn({3, 4}),
        at::randn({2, 3}, at::kDouble),
        at::arange(24, at::kLong).reshape({2, 3, 4}),
        at::randint(0, 255, {5}, at::kByte),
        at::rand({4}) > 0.5,
        at::randn({3}).to(at::kHalf),
        at::randn({2}, at::kComplexFloat),
        at::scalar_tensor(3.5),
        at::empty({0, 3}),
    };
    for (const at::Tensor& t : tensors) {
        INFO("dtype " << t.dtype() << " sizes " << t.sizes());
        const at::Tensor back = mpify::ranch(one_worker(), 1, in_library::echo_tensor, t).front();
        CHECK(back.scalar_type() == t.scalar_type());
        CHECK(back.sizes() == t.sizes());
        CHECK(at::equal(back, t));
    }
}

TEST_CASE("a non-contiguous tensor arrives equal and contiguous", "[types][tensor]") {
    const at::Tensor view = at::arange(12, at::kFloat).reshape({3, 4}).t().slice(0, 1, 3);
    REQUIRE_FALSE(view.is_contiguous());
    const at::Tensor back = mpify::ranch(one_worker(), 1, in_library::echo_tensor, view).front();
    CHECK(back.is_contiguous());
    CHECK(at::equal(back, view));
}

TEST_CASE("tensors with LibTorch's lazy flags arrive with the values they stand for, both ways", "[types][tensor]") {
    // LibTorch 1.13's lazy flags: conjugate (conj()), negative (the imaginary part of a
    // conjugate), and zero (an efficient zero tensor: no storage at all).
    const at::Tensor complex = at::tensor({1.0, 2.0, 3.0, -4.0}, at::kFloat).view(at::kComplexFloat);  // 1+2i, 3-4i
    const at::Tensor conjugate = complex.conj();
    const at::Tensor negative = at::imag(conjugate);
    const at::Tensor zero = at::_efficientzerotensor({3}, at::kFloat);
    REQUIRE(conjugate.is_conj());
    REQUIRE(negative.is_neg());
    REQUIRE(zero._is_zerotensor());
    for (const at::Tensor& t : {conjugate, negative, zero}) {
        INFO("sent " << t);
        const at::Tensor back = mpify::ranch(one_worker(), 1, in_library::echo_tensor, t).front();
        CHECK_FALSE(back.is_conj());
        CHECK(at::equal(back, t.resolve_conj().resolve_neg()));
    }
    CHECK(at::equal(mpify::ranch(one_worker(), 1, in_library::echo_tensor, zero).front(), at::zeros({3})));
    for (const char* flag : {"conj", "neg", "zero"}) {
        INFO("returned with " << flag);
        const at::Tensor back =
            mpify::ranch(one_worker(), 1, in_library::lazy_view, complex, std::string(flag)).front();
        const at::Tensor expected = std::string(flag) == "conj"  ? complex.conj().resolve_conj()
                                    : std::string(flag) == "neg" ? at::imag(complex.conj()).resolve_neg()
                                                                 : at::zeros(complex.sizes(), complex.options());
        CHECK(at::equal(back, expected));
    }
}

TEST_CASE("an undefined tensor and requires_grad survive the trip", "[types][tensor]") {
    CHECK_FALSE(mpify::ranch(one_worker(), 1, in_library::echo_tensor, at::Tensor()).front().defined());
    const at::Tensor weights = at::ones({2}).requires_grad_(true);
    CHECK(mpify::ranch(one_worker(), 1, in_library::echo_tensor, weights).front().requires_grad());
}

TEST_CASE("a CUDA tensor arriving where no GPU is seen is refused, naming the rank and what to send",
          "[types][tensor]") {
    if (at::hasCUDA() && at::detail::getCUDAHooks().getNumGPUs() > 0) {
        WARN("not checked: this machine has a GPU (the gpu tests check where a CUDA tensor arrives)");
        return;
    }
    try {
        mpify::ranch(one_worker(), 1, sum_of_sent_as_cuda, SentAsCuda{at::arange(4)});
        FAIL("a CUDA tensor was taken where there is no GPU");
    } catch (const mpify::WorkerError& e) {
        CHECK_THAT(e.what(), Catch::Contains("rank 0 threw std::runtime_error") &&
                                 Catch::Contains("a CUDA tensor arrived in a process that sees no GPU") &&
                                 Catch::Contains("send tensor.cpu()"));
    }
}

TEST_CASE("tensor results come back from every rank", "[types][tensor]") {
    const auto per_rank = mpify::ranch(3, in_library::rank_tensors, at::zeros({2}));
    for (int rank = 0; rank < 3; ++rank) {
        CHECK(at::equal(per_rank[rank][0], at::full({2}, static_cast<float>(rank))));
        CHECK(at::equal(per_rank[rank][1], at::full({2}, rank)));
    }
}

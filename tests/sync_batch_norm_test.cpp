// SyncBatchNorm on 2 and 3 ranks against torch's BatchNorm on the whole batch in one process.
#include "support.hpp"
#include "sync_batch_norm_functions.hpp"

#include <ATen/ATen.h>
#include <catch2/catch.hpp>

using Catch::Contains;
using ddp_test::SyncNormCase;
using ddp_test::SyncNormReport;

namespace {

void check_reports(const std::vector<SyncNormCase>& cases, const std::vector<SyncNormReport>& reports) {
    REQUIRE(reports.size() == cases.size());
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const SyncNormCase& c = cases[i];
        const SyncNormReport& r = reports[i];
        INFO(c.dims << "d, " << (c.converted ? "converted Sequential" : "typed members") << ", batches of "
                    << Catch::Detail::stringify(c.batch_sizes) << ": largest difference " << r.largest_difference
                    << " in " << r.worst);
        CHECK(r.largest_difference < 1e-5);
        // The converted model: 3 norms, one of them in a nested Sequential; the other: 2.
        CHECK(r.norms == (c.converted ? 3 : 2));
        CHECK(r.forward_calls == r.norms);   // one all-reduce per norm forward...
        CHECK(r.backward_calls == r.norms);  // ... and one per norm backward
        CHECK(r.forward_call_bytes == (2 * 3 + 1) * 8);  // sum, sum of squares (3 channels), count
        CHECK(r.eval_calls == 0);                        // eval mode talks to no one
    }
}

}  // namespace

TEST_CASE("SyncBatchNorm on 2 ranks equals BatchNorm on the whole batch in 1d 2d and 3d", "[ddp][sync_batch_norm]") {
    std::vector<SyncNormCase> cases;
    for (int dims : {1, 2, 3}) {
        cases.push_back({dims, {4, 4}, false});
        cases.push_back({dims, {1, 6}, true});  // unequal: a last batch of one
    }
    check_reports(cases, mpify::in_ddp(2, ddp_test::compare_sync_batch_norm, cases));
}

TEST_CASE("SyncBatchNorm on 3 ranks of unequal batches, one empty, equals BatchNorm on the whole batch",
          "[ddp][sync_batch_norm]") {
    std::vector<SyncNormCase> cases;
    for (int dims : {1, 2, 3}) {
        cases.push_back({dims, {2, 5, 3}, false});
        cases.push_back({dims, {3, 0, 4}, true});
    }
    check_reports(cases, mpify::in_ddp(3, ddp_test::compare_sync_batch_norm, cases));
}

TEST_CASE("a converted model under DistributedDataParallel trains as BatchNorm in one process",
          "[ddp][sync_batch_norm]") {
    const std::vector<at::Tensor> alone = ddp_test::train_with_sync_batch_norm(3, false);
    const std::vector<at::Tensor> ranks = mpify::in_ddp(2, ddp_test::train_with_sync_batch_norm, 3, true);
    REQUIRE(ranks.size() == alone.size());
    for (std::size_t i = 0; i < alone.size(); ++i) {
        INFO("parameter or buffer " << i << ": " << ranks[i] << " against " << alone[i]);
        CHECK(at::allclose(ranks[i].to(at::kDouble), alone[i].to(at::kDouble), 0, 1e-5));
    }
}

TEST_CASE("a global batch of one value per channel, or a rank's wrong channel count, is an error naming it",
          "[ddp][sync_batch_norm][failure]") {
    CHECK_THROWS_WITH(mpify::in_ddp(2, ddp_test::sync_batch_norm_misfed, std::string("one value")),
                      Contains("mpify::SyncBatchNorm1d: the global batch holds 1 value(s) per channel"));
    CHECK_THROWS_WITH(mpify::in_ddp(2, ddp_test::sync_batch_norm_misfed, std::string("channels")),
                      Contains("rank 1 threw mpify::UsageError: mpify::SyncBatchNorm1d: input of 4 channels"));
}

TEST_CASE("SyncBatchNorm outside a group is BatchNorm and prints as one", "[sync_batch_norm]") {
    const std::string result = ddp_test::sync_batch_norm_alone();
    INFO(result);
    CHECK(std::stod(result.substr(0, result.find(' '))) < 1e-6);
    CHECK_THAT(result, Contains("| mpify::SyncBatchNorm2d(4, eps=1e-05, momentum=0.2, affine=true, "
                                "track_running_stats=true)"));
}

// mpify::GradScaler's rules, by hand-computed values (the same on every LibTorch: its
// kernels on 2.x, plain tensor operations on 1.13's CPU). grad_scaler_reference_test.py
// compares it with Python's torch.amp.GradScaler step for step, where that Python exists.
#include <mpify/error.hpp>
#include <mpify/grad_scaler.hpp>

#include <torch/optim/sgd.h>
#include <torch/serialize.h>

#include <catch2/catch.hpp>

#include <limits>
#include <sstream>

using Catch::Contains;

namespace {

// One parameter w = {1, 2} and the loss w · x, whose gradient is x: unscaled it is x
// again, whatever the scale.
struct OneParameter {
    at::Tensor w = torch::tensor({1.0f, 2.0f}).requires_grad_();
    at::Tensor x = torch::tensor({0.5f, -0.25f});
    torch::optim::SGD optimizer{{w}, torch::optim::SGDOptions(1.0)};

    at::Tensor loss() const { return (w * x).sum(); }
    // A backward of the scaled loss; `poison` replaces the first gradient value.
    void backward(mpify::GradScaler& scaler, float poison = 0.0f) {
        optimizer.zero_grad();
        scaler.scale(loss()).backward();
        if (poison != 0.0f) {
            torch::NoGradGuard no_grad;
            w.mutable_grad()[0] = poison;
        }
    }
};

}  // namespace

TEST_CASE("GradScaler unscales, steps, and grows the scale every growth_interval", "[grad_scaler]") {
    mpify::GradScaler scaler({/*init_scale=*/1024.0, /*growth_factor=*/2.0, /*backoff_factor=*/0.5,
                              /*growth_interval=*/2});
    OneParameter p;
    CHECK(scaler.get_scale() == 1024.0);
    CHECK(scaler.scale(torch::tensor(3.0f)).item<float>() == 3072.0f);

    p.backward(scaler);
    CHECK(p.w.grad()[0].item<float>() == 0.5f * 1024);  // scaled
    scaler.unscale_(p.optimizer);
    CHECK(torch::equal(p.w.grad(), p.x));  // unscaled exactly (a power of two)
    CHECK(scaler.step(p.optimizer));
    CHECK(torch::equal(p.w.detach(), torch::tensor({0.5f, 2.25f})));  // w - 1.0 * x
    scaler.update();
    CHECK(scaler.get_scale() == 1024.0);
    CHECK(scaler.growth_tracker() == 1);

    p.backward(scaler);
    CHECK(scaler.step(p.optimizer));  // unscales by itself
    scaler.update();
    CHECK(torch::equal(p.w.detach(), torch::tensor({0.0f, 2.5f})));
    CHECK(scaler.get_scale() == 2048.0);  // two good steps in a row: grown
    CHECK(scaler.growth_tracker() == 0);
}

TEST_CASE("GradScaler skips a step whose gradient is inf or NaN and backs off", "[grad_scaler]") {
    for (float poison : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
        INFO("gradient value " << poison);
        mpify::GradScaler scaler({/*init_scale=*/4096.0, 2.0, /*backoff_factor=*/0.25, /*growth_interval=*/3});
        OneParameter p;
        p.backward(scaler);
        CHECK(scaler.step(p.optimizer));
        scaler.update();
        CHECK(scaler.growth_tracker() == 1);

        p.backward(scaler, poison);
        const at::Tensor before = p.w.detach().clone();
        CHECK_FALSE(scaler.step(p.optimizer));
        CHECK(torch::equal(p.w.detach(), before));  // not stepped
        scaler.update();
        CHECK(scaler.get_scale() == 1024.0);   // 4096 × 0.25
        CHECK(scaler.growth_tracker() == 0);  // the count starts again
    }
}

TEST_CASE("GradScaler backs off when any optimizer skipped, each stepping on its own gradients", "[grad_scaler]") {
    mpify::GradScaler scaler({256.0, 2.0, 0.5, 100});
    OneParameter clean, poisoned;
    clean.optimizer.zero_grad();
    poisoned.optimizer.zero_grad();
    scaler.scale(clean.loss() + poisoned.loss()).backward();
    {
        torch::NoGradGuard no_grad;
        poisoned.w.mutable_grad()[1] = std::numeric_limits<float>::infinity();
    }
    CHECK(scaler.step(clean.optimizer));
    CHECK_FALSE(scaler.step(poisoned.optimizer));
    scaler.update();
    CHECK(scaler.get_scale() == 128.0);
}

TEST_CASE("GradScaler keeps its scale when growing it would overflow float32", "[grad_scaler]") {
    const double largest = std::numeric_limits<float>::max();
    mpify::GradScaler scaler({largest, 2.0, 0.5, /*growth_interval=*/1});
    OneParameter p;
    p.backward(scaler);
    scaler.step(p.optimizer);
    scaler.update();
    CHECK(scaler.get_scale() == largest);
    CHECK(scaler.growth_tracker() == 0);
}

TEST_CASE("GradScaler names each misuse", "[grad_scaler]") {
    OneParameter p;
    SECTION("a step before anything was scaled") {
        mpify::GradScaler scaler;
        CHECK_THROWS_WITH(scaler.step(p.optimizer), Contains("step: nothing was scaled yet"));
        CHECK_THROWS_WITH(scaler.update(), Contains("update: nothing was scaled yet"));
    }
    SECTION("unscale_ twice, step twice, unscale_ after step") {
        mpify::GradScaler scaler;
        p.backward(scaler);
        scaler.unscale_(p.optimizer);
        CHECK_THROWS_WITH(scaler.unscale_(p.optimizer), Contains("already called for this optimizer"));
        scaler.step(p.optimizer);
        CHECK_THROWS_WITH(scaler.step(p.optimizer), Contains("step: already called"));
        CHECK_THROWS_WITH(scaler.unscale_(p.optimizer), Contains("called after step()"));
        scaler.update();
        CHECK_THROWS_WITH(scaler.update(), Contains("no optimizer was unscaled or stepped"));
    }
    SECTION("a step with no gradient") {
        mpify::GradScaler scaler;
        scaler.scale(p.loss());
        CHECK_THROWS_WITH(scaler.step(p.optimizer), Contains("none of the optimizer's parameters has a gradient"));
    }
    SECTION("float16 gradients") {
        mpify::GradScaler scaler;
        at::Tensor half = torch::ones({2}, torch::kHalf).requires_grad_();
        torch::optim::SGD optimizer({half}, torch::optim::SGDOptions(0.1));
        scaler.scale(half.sum()).backward();
        CHECK_THROWS_WITH(scaler.unscale_(optimizer), Contains("parameter 1 of the optimizer has a float16 gradient"));
    }
    SECTION("options out of range") {
        CHECK_THROWS_AS(mpify::GradScaler({65536.0, /*growth_factor=*/1.0}), mpify::UsageError);
        CHECK_THROWS_WITH(mpify::GradScaler({65536.0, 2.0, /*backoff_factor=*/1.5}), Contains("backoff_factor"));
        CHECK_THROWS_WITH(mpify::GradScaler({65536.0, 2.0, 0.5, /*growth_interval=*/0}), Contains("growth_interval"));
        CHECK_THROWS_WITH(mpify::GradScaler({/*init_scale=*/-1.0}), Contains("init_scale"));
        mpify::GradScaler scaler;
        CHECK_THROWS_WITH(scaler.set_growth_factor(0.5), Contains("growth_factor"));
        CHECK(scaler.growth_factor() == 2.0);
    }
}

TEST_CASE("A disabled GradScaler leaves the loop as in float32", "[grad_scaler]") {
    mpify::GradScaler scaler({65536.0, 2.0, 0.5, 2000, /*enabled=*/false});
    OneParameter p;
    const at::Tensor loss = p.loss();
    CHECK(scaler.scale(loss).is_same(loss));
    p.backward(scaler);
    CHECK(torch::equal(p.w.grad(), p.x));
    CHECK(scaler.step(p.optimizer));
    scaler.update();
    CHECK(scaler.get_scale() == 1.0);
    CHECK_FALSE(scaler.is_enabled());
}

TEST_CASE("GradScaler's state goes through torch::save and torch::load", "[grad_scaler]") {
    mpify::GradScaler scaler({512.0, 4.0, 0.125, /*growth_interval=*/5});
    OneParameter p;
    for (int i = 0; i < 3; ++i) {
        p.backward(scaler);
        scaler.step(p.optimizer);
        scaler.update();
    }
    std::stringstream file;
    torch::save(scaler, file);

    mpify::GradScaler resumed;  // default options: the file's replace them
    torch::load(resumed, file);
    const mpify::GradScalerState s = resumed.state();
    CHECK(s.scale == 512.0);
    CHECK(s.growth_factor == 4.0);
    CHECK(s.backoff_factor == 0.125);
    CHECK(s.growth_interval == 5);
    CHECK(s.growth_tracker == 3);
    // Two more good steps grow it, as they would have the original.
    for (int i = 0; i < 2; ++i) {
        p.backward(resumed);
        resumed.step(p.optimizer);
        resumed.update();
    }
    CHECK(resumed.get_scale() == 2048.0);

    SECTION("an archive without a scaler") {
        std::stringstream other;
        torch::save(torch::ones({1}), other);
        mpify::GradScaler fresh;
        CHECK_THROWS_WITH(torch::load(fresh, other), Contains("the archive holds no scaler"));
        CHECK(fresh.get_scale() == 65536.0);
    }
    SECTION("a state out of range changes nothing") {
        mpify::GradScalerState bad = s;
        bad.growth_tracker = 7;  // ≥ growth_interval
        CHECK_THROWS_WITH(resumed.load_state(bad), Contains("growth_tracker must be in [0, growth_interval = 5)"));
        CHECK(resumed.get_scale() == 2048.0);
        CHECK(resumed.growth_tracker() == 0);
    }
}

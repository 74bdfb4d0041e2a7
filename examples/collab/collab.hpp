#pragma once
// Example 3, "collab": collaborative filtering (fastai lesson 8 style). No ratings data
// set is installable here, so the example generates one from hidden latent factors
// with a fixed seed: rating = mean + user bias + item bias + <user factors, item
// factors> + Gaussian noise. The noise is the floor no model can beat, and the example
// reports its RMSE next to it. Free of LibTorch, like intro.hpp.
#include <mpify/learner/history.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mpify_examples {
namespace collab {

/// The generated data and the model to fit.
struct Config {
    std::int64_t users = 2000;
    std::int64_t items = 1500;
    std::int64_t ratings = 600000;  ///< (user, item) pairs drawn at random; 10% are held out
    int hidden_factors = 8;         ///< dimension of the generating factors
    double noise = 0.3;             ///< standard deviation of the rating noise: the RMSE floor
    int factors = 32;               ///< embedding size of the model
    int epochs = 6;
    double max_lr = 1e-2;
    double weight_decay = 0.1;
    std::int64_t batch_size = 512;  ///< per rank
    std::uint64_t seed = 42;
    std::string csv;                ///< per-epoch metrics from rank 0; empty: none

    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & users & items & ratings & hidden_factors & noise & factors & epochs & max_lr & weight_decay & batch_size &
            seed & csv;
    }
};

/// One held-out rating and the model's guess.
struct Prediction {
    std::int64_t user = 0;
    std::int64_t item = 0;
    double rating = 0;
    double predicted = 0;

    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & user & item & rating & predicted;
    }
};

/// What train returns (from rank 0 under in_ddp).
struct Result {
    mpify::learner::History history;                      ///< metric: rmse on the held-out ratings
    double noise_floor = 0;               ///< RMSE of the true ratings without noise, held-out set
    double mean_baseline = 0;             ///< RMSE of always predicting the mean training rating
    std::vector<Prediction> predictions;  ///< the first 8 held-out ratings

    template <class Archive>
    void serialize(Archive& ar, const unsigned int /*version*/) {
        ar & history & noise_floor & mean_baseline & predictions;
    }
};

/// Generates the ratings and fits the dot-product model, alone or in every rank of in_ddp.
Result train(Config config);

/// The example's promise: held-out RMSE within this factor of the noise floor.
constexpr double target_rmse_over_floor = 1.15;

}  // namespace collab
}  // namespace mpify_examples

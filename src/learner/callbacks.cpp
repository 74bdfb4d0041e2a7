#include <mpify/learner/callbacks.hpp>

#include <mpify/learner/learner.hpp>

#include <mpify/process.hpp>

#include <signal.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <utility>

MPIFY_BEGIN_NAMESPACE
namespace learner {

std::string minutes_seconds(double seconds) {
    const int total = std::isfinite(seconds) ? static_cast<int>(seconds + 0.5) : 0;
    char text[16];
    std::snprintf(text, sizeof text, "%02d:%02d", total / 60, total % 60);
    return text;
}

void KillRankOnce::before_epoch(const Learner& /*learner*/, int epoch, std::int64_t /*batches*/) {
    current_epoch_ = epoch;
}

void KillRankOnce::after_batch(const Learner& learner, std::int64_t batch, double /*loss*/) {
    if (mpify::restart_count() == 0 && learner.rank() == rank_ && current_epoch_ == epoch_ && batch == batch_) {
        std::cout << std::flush;
        ::raise(SIGKILL);
    }
}

void ProgressPrinter::before_fit(const Learner& learner, int epochs) {
    if (learner.rank() != 0) return;
    const std::int64_t budget = learner.options().max_batches;
    const std::string capped = budget > 0 ? " (at most " + std::to_string(budget) + " batches per epoch)" : "";
    std::printf("training %d epoch%s on %d process%s%s\n", epochs, epochs == 1 ? "" : "s", learner.world_size(),
                learner.world_size() == 1 ? "" : "es", capped.c_str());
    std::printf("%-6s %8s %11s %11s", "epoch", "batches", "train_loss", "valid_loss");
    for (const std::string& name : learner.metric_names()) std::printf(" %14s", name.c_str());
    std::printf(" %6s\n", "time");
    std::fflush(stdout);
}

void ProgressPrinter::after_epoch(const Learner& learner, const History& history) {
    if (learner.rank() != 0) return;
    const EpochRecord& e = history.epochs.back();
    std::printf("%-6d %8lld %11.4f %11.4f", e.epoch, static_cast<long long>(e.batches), e.train_loss, e.valid_loss);
    for (double m : e.metrics) std::printf(" %14.4f", m);
    std::printf(" %6s\n", minutes_seconds(e.seconds).c_str());
    std::fflush(stdout);
}

void CsvLogger::after_epoch(const Learner& learner, const History& history) {
    if (learner.rank() != 0) return;
    std::ofstream out(path_);
    if (!out) throw std::runtime_error("CsvLogger: cannot write " + path_ + " (does its folder exist?)");
    out << "epoch,batches,train_loss,valid_loss";
    for (const std::string& name : history.metric_names) out << ',' << name;
    out << ",seconds,world_size\n";
    for (const EpochRecord& e : history.epochs) {
        out << e.epoch << ',' << e.batches << ',' << e.train_loss << ',' << e.valid_loss;
        for (double m : e.metrics) out << ',' << m;
        out << ',' << e.seconds << ',' << history.world_size << '\n';
    }
}

bool lower_is_better(const std::string& name) {
    for (const char* word : {"loss", "error", "rmse"})
        if (name.find(word) != std::string::npos) return true;
    return false;
}

namespace {

// Whether `value` beats `best` by more than `min_delta` in the direction that is better.
bool improves(double value, double best, double min_delta, bool lower) {
    return lower ? value < best - min_delta : value > best + min_delta;
}

}  // namespace

EarlyStopping::EarlyStopping(std::string monitor, double min_delta, int patience)
    : monitor_(std::move(monitor)), min_delta_(min_delta), patience_(patience) {
    if (patience_ < 1)
        throw std::invalid_argument("EarlyStopping: patience is " + std::to_string(patience_) +
                                    "; it must be at least 1 epoch");
}

void EarlyStopping::before_fit(const Learner& /*learner*/, int /*epochs*/) {
    have_best_ = false;
    epochs_without_gain_ = 0;
    stop_ = false;
}

void EarlyStopping::after_epoch(const Learner& /*learner*/, const History& history) {
    const double value = history.final(monitor_);
    if (!have_best_ || improves(value, best_, min_delta_, lower_is_better(monitor_))) {
        best_ = value;
        have_best_ = true;
        epochs_without_gain_ = 0;
        return;
    }
    stop_ = ++epochs_without_gain_ >= patience_;
}

SaveModel::SaveModel(std::string path, std::string monitor) : path_(std::move(path)), monitor_(std::move(monitor)) {}

void SaveModel::before_fit(const Learner& /*learner*/, int /*epochs*/) { have_best_ = false; }

void SaveModel::after_epoch(const Learner& learner, const History& history) {
    const double value = history.final(monitor_);
    if (have_best_ && !improves(value, best_, 0.0, lower_is_better(monitor_))) return;
    best_ = value;
    have_best_ = true;
    learner.export_model(path_);
}

}  // namespace learner
MPIFY_END_NAMESPACE

#pragma once
// Callbacks: code the Learner calls at fixed points of a fit, as fastai's callbacks.
// Every rank calls them; the ones that print or write files act on rank 0 only.
#include <mpify/abi.hpp>
#include <mpify/learner/history.hpp>

#include <cstdint>
#include <string>

MPIFY_BEGIN_NAMESPACE
namespace learner {

class Learner;

/// Override the points you need; each gets the learner (rank, world size, history).
class Callback {
public:
    /// Callbacks are held by shared_ptr<Callback> (Learner::add_callback).
    virtual ~Callback() = default;
    /// Before the first epoch of a fit of `epochs` epochs.
    virtual void before_fit(const Learner& /*learner*/, int /*epochs*/) {}
    /// Before each epoch's training: `epoch` is 1-based, `batches` this rank will run.
    virtual void before_epoch(const Learner& /*learner*/, int /*epoch*/, std::int64_t /*batches*/) {}
    /// After each training batch, with its loss on this rank.
    virtual void after_batch(const Learner& /*learner*/, std::int64_t /*batch*/, double /*loss*/) {}
    /// After each epoch's validation; `history.epochs.back()` is the epoch just done.
    virtual void after_epoch(const Learner& /*learner*/, const History& /*history*/) {}
    /// After the last epoch.
    virtual void after_fit(const Learner& /*learner*/, const History& /*history*/) {}
    /// Asked after each epoch's after_epoch: true ends the fit there. A callback that
    /// decides from the history's numbers (over all ranks) decides the same on every rank.
    virtual bool stop_after_epoch() const { return false; }
};

/// Whether a smaller value of the quantity `name` is better: losses and errors ("loss",
/// "error", "rmse" in the name), as fastai decides; otherwise a larger one (accuracy).
bool lower_is_better(const std::string& name);

/// Ends the fit once `monitor` (train_loss, valid_loss or a metric's name) has not
/// improved on its best by more than `min_delta` for `patience` epochs in a row, as
/// fastai's EarlyStoppingCallback.
class EarlyStopping : public Callback {
public:
    /// Watches `monitor`; stops after `patience` epochs without an improvement above `min_delta`.
    explicit EarlyStopping(std::string monitor = "valid_loss", double min_delta = 0.0, int patience = 1);
    void before_fit(const Learner& learner, int epochs) override;
    void after_epoch(const Learner& learner, const History& history) override;
    bool stop_after_epoch() const override { return stop_; }

private:
    std::string monitor_;
    double min_delta_;
    int patience_;
    double best_ = 0;
    bool have_best_ = false;
    int epochs_without_gain_ = 0;
    bool stop_ = false;
};

/// Exports the model (Learner::export_model, rank 0) to `path` after every epoch whose
/// `monitor` is the best of the fit so far (fastai's SaveModelCallback with every_epoch
/// off): at the end of the fit, `path` holds the best epoch's model.
class SaveModel : public Callback {
public:
    /// Exports to `path` whenever `monitor` reaches its best value of the fit.
    SaveModel(std::string path, std::string monitor = "valid_loss");
    void before_fit(const Learner& learner, int epochs) override;
    void after_epoch(const Learner& learner, const History& history) override;

private:
    std::string path_;
    std::string monitor_;
    double best_ = 0;
    bool have_best_ = false;
};

/// `seconds` as "mm:ss", the way the progress line and bar show times ("00:00" when not
/// a finite number).
std::string minutes_seconds(double seconds);

/// Prints a table header, then one line per epoch on rank 0: epoch, batches, losses,
/// metrics, time (the numbers are over all ranks).
class ProgressPrinter : public Callback {
public:
    void before_fit(const Learner& learner, int epochs) override;
    void after_epoch(const Learner& learner, const History& history) override;
};

/// For demonstrations and tests of Options::restarts: on a call's first attempt
/// (mpify::restart_count() == 0), rank `rank` kills itself with SIGKILL after batch
/// `batch` (0-based) of epoch `epoch` (1-based), as the OOM killer would; on a restart
/// it does nothing.
class KillRankOnce : public Callback {
public:
    /// Kills rank `rank` after batch `batch` (0-based) of epoch `epoch` (1-based), once.
    KillRankOnce(int rank, int epoch, std::int64_t batch) : rank_(rank), epoch_(epoch), batch_(batch) {}
    void before_epoch(const Learner& learner, int epoch, std::int64_t batches) override;
    void after_batch(const Learner& learner, std::int64_t batch, double loss) override;

private:
    int rank_;
    int epoch_;
    std::int64_t batch_;
    int current_epoch_ = 0;
};

/// Rewrites `path` on rank 0 after every epoch with all epochs so far as CSV:
/// `epoch,batches,train_loss,valid_loss,` then one column per metric, then `seconds,world_size`.
class CsvLogger : public Callback {
public:
    /// Writes to `path` (rank 0), replacing it after each epoch.
    explicit CsvLogger(std::string path) : path_(std::move(path)) {}
    void after_epoch(const Learner& learner, const History& history) override;

private:
    std::string path_;
};

}  // namespace learner
MPIFY_END_NAMESPACE

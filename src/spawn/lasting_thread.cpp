#include "spawn/lasting_thread.hpp"

#include "common/signal_free_thread.hpp"

#include <unistd.h>

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE
namespace {

// One task at a time: the caller hands it over and waits until it is done.
class LastingThread {
public:
    LastingThread() {
        start_signal_free_thread("mpify-spawner", [this] { serve(); }).detach();  // lives as long as the process
    }

    void run(const std::function<void()>& task) {
        std::unique_lock lock(mutex_);
        idle_.wait(lock, [&] { return task_ == nullptr; });
        task_ = &task;
        done_ = false;
        error_ = nullptr;
        wake_.notify_one();
        finished_.wait(lock, [&] { return done_; });
        task_ = nullptr;
        std::exception_ptr error = error_;
        idle_.notify_one();
        if (error) std::rethrow_exception(error);
    }

    const pid_t owner = ::getpid();

private:
    [[noreturn]] void serve() {
        std::unique_lock lock(mutex_);
        for (;;) {
            wake_.wait(lock, [&] { return task_ != nullptr && !done_; });
            const std::function<void()>& task = *task_;
            lock.unlock();
            std::exception_ptr error;
            try {
                task();
            } catch (...) {
                error = std::current_exception();
            }
            lock.lock();
            error_ = error;
            done_ = true;
            finished_.notify_one();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_, finished_, idle_;
    const std::function<void()>* task_ = nullptr;
    bool done_ = false;
    std::exception_ptr error_;
};

std::mutex creation;
LastingThread* lasting = nullptr;  // never destroyed: its thread runs until the process ends

}  // namespace

void run_on_lasting_thread(const std::function<void()>& task) {
    LastingThread* thread;
    {
        std::lock_guard lock(creation);
        // A forked copy of the process has no such thread (fork copies only the caller's):
        // it gets its own, and leaves the copied object alone.
        if (lasting == nullptr || lasting->owner != ::getpid()) lasting = new LastingThread;
        thread = lasting;
    }
    thread->run(task);
}

MPIFY_END_DETAIL_NAMESPACE

// The rendezvous of a DdpGuard, against a real TCPStore on loopback, without processes.
#include "ddp/rendezvous.hpp"

#include <catch2/catch.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

using Catch::Contains;

namespace {

// A store whose wait, when it times out, lets the awaited key arrive (over another
// connection, confirmed by a round trip) before reporting the timeout: the moment a
// late rank joins just after the others gave up on it.
class LateArrivalStore : public c10d::Store {
public:
    LateArrivalStore(c10::intrusive_ptr<c10d::Store> waiting, c10::intrusive_ptr<c10d::Store> late)
        : waiting_(std::move(waiting)), late_(std::move(late)) {}
    void set(const std::string& key, const std::vector<uint8_t>& value) override { waiting_->set(key, value); }
    std::vector<uint8_t> get(const std::string& key) override { return waiting_->get(key); }
    int64_t add(const std::string& key, int64_t value) override { return waiting_->add(key, value); }
    bool deleteKey(const std::string& key) override { return waiting_->deleteKey(key); }
    bool check(const std::vector<std::string>& keys) override { return waiting_->check(keys); }
    int64_t getNumKeys() override { return waiting_->getNumKeys(); }
    void wait(const std::vector<std::string>& keys) override { waiting_->wait(keys); }
    void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
        try {
            waiting_->wait(keys, timeout);
        } catch (...) {
            for (const auto& key : keys) late_->set(key, std::vector<uint8_t>{1});
            REQUIRE(late_->check(keys));
            throw;
        }
    }

private:
    c10::intrusive_ptr<c10d::Store> waiting_, late_;
};

}  // namespace

TEST_CASE("a rank that joins just after the timeout is told apart from one that never came", "[ddp][failure]") {
    mpify::detail::DdpSettings s;
    s.rank = 0;
    s.world_size = 3;
    s.addr = "127.0.0.1";
    s.timeout = std::chrono::milliseconds(1000);
    c10d::TCPStoreOptions hosting;
    hosting.port = 0;  // the kernel picks a free one
    hosting.isServer = true;
    hosting.waitWorkers = false;
    const c10d::TCPStore server(s.addr, hosting);
    s.port = server.getPort();
    LateArrivalStore store(mpify::detail::connect_store(s, false), mpify::detail::connect_store(s, false));
    // Rank 1 comes late, after rank 0 stopped waiting for it; rank 2 never comes.
    CHECK_THROWS_WITH(mpify::detail::wait_for_all(store, s, "joined", "did not join the group"),
                      Contains("rank(s) 2 did not join the group"));
}


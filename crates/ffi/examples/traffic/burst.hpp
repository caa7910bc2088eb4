// burst.hpp: on request (SIGUSR1), move N idle QPs of a device from RTS to
// SQD on a thread of their own: N SQ_DRAINED queue on the device's async
// fd, while the loop goes on reading it. The VM test does this during a
// pull, so the burst sits ahead of the PORT_ACTIVE.
#pragma once

#include "verbs.hpp"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace traffic {

class burster {
public:
    burster() = default;
    ~burster();
    burster(const burster &) = delete;
    burster &operator=(const burster &) = delete;

    // Creates the idle QPs (says how long that took) and the thread.
    void start(std::shared_ptr<verbs_device> dev, size_t n, uint8_t port);
    // From the loop: one burst, as soon as the thread gets to it.
    void trigger();

private:
    void loop();
    std::unique_ptr<idle_qps> qps_;
    std::mutex mu_;
    std::condition_variable cv_;
    uint64_t requested_ = 0;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace traffic

// burst.cpp: see burst.hpp.
#include "burst.hpp"

namespace traffic {

burster::~burster() {
    {
        std::lock_guard<std::mutex> l(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void burster::start(std::shared_ptr<verbs_device> dev, size_t n, uint8_t port) {
    if (!dev) throw verbs_error("the burst's device is not open", ENODEV);
    const std::string name = dev->name();
    const uint64_t t0 = now_ns();
    qps_ = std::make_unique<idle_qps>(std::move(dev), n, port);
    line("idle_qps").str("device", name).num("qps", n).num("t_ns", now_ns()).fixed("setup_ms", double(now_ns() - t0) / 1e6)
        .emit();
    thread_ = std::thread([this] { loop(); });
}

void burster::trigger() {
    {
        std::lock_guard<std::mutex> l(mu_);
        ++requested_;
    }
    cv_.notify_all();
}

void burster::loop() {
    uint64_t done = 0;
    bool drained = false;
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
        cv_.wait(l, [&] { return stop_ || requested_ > done; });
        if (stop_) return;
        ++done;
        l.unlock();
        // A second burst: back to RTS first (that raises nothing).
        const size_t resume_errors = drained ? qps_->resume_all() : 0;
        const uint64_t t0 = now_ns();
        const size_t errors = qps_->drain_all();
        drained = true;
        line("burst").num("t_ns", t0).num("done_ns", now_ns()).num("qps", qps_->size()).num("errors", errors + resume_errors)
            .emit();
        l.lock();
    }
}

}  // namespace traffic

// R ranks of one fit as threads of one process, for tests of the code that runs on every rank: the
// same exchanges as processes under MPI (integer sums and maxima over the ranks), through memory.
#pragma once

#include "vlattice/collective.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace vlattice::test {

class ThreadRanks {
public:
    explicit ThreadRanks(int size) : size_(size) {}

    // body(rank) on each of the ranks at once; returns when all have.
    void run(const std::function<void(Collective&)>& body) {
        std::vector<Rank> ranks;
        for (int r = 0; r < size_; ++r) {
            ranks.emplace_back(*this, r);
        }
        std::vector<std::thread> threads;
        for (int r = 0; r < size_; ++r) {
            threads.emplace_back([&, r] { body(ranks[r]); });
        }
        for (std::thread& t : threads) {
            t.join();
        }
    }

private:
    class Rank final : public Collective {
    public:
        Rank(ThreadRanks& all, int rank) : all_(all), rank_(rank) {}
        int rank() const override { return rank_; }
        int size() const override { return all_.size_; }
        void sum(std::int64_t* values, std::size_t count) override {
            all_.combine(rank_, values, count, all_.signed_, [](std::int64_t a, std::int64_t b) { return a + b; });
        }
        void sum(std::uint64_t* values, std::size_t count) override {
            all_.combine(rank_, values, count, all_.unsigned_, [](std::uint64_t a, std::uint64_t b) { return a + b; });
        }
        void max(std::uint64_t* values, std::size_t count) override {
            all_.combine(rank_, values, count, all_.unsigned_,
                         [](std::uint64_t a, std::uint64_t b) { return std::max(a, b); });
        }
        void gather_to_first(const void* mine, std::uint64_t bytes, void* all, std::uint64_t capacity) override {
            all_.gather(rank_, mine, bytes, all, capacity);
        }

    private:
        ThreadRanks& all_;
        int rank_;
    };

    // Rank 0 starts the result from its values once every rank has arrived; the others fold theirs
    // in; every rank copies the result out before any can start the next exchange.
    template <class T, class Op>
    void combine(int rank, T* values, std::size_t count, std::vector<T>& result, Op op) {
        wait();
        if (rank == 0) {
            result.assign(values, values + count);
        }
        wait();
        if (rank != 0) {
            std::lock_guard<std::mutex> lock(mutex_);
            for (std::size_t i = 0; i < count; ++i) {
                result[i] = op(result[i], values[i]);
            }
        }
        wait();
        std::copy(result.begin(), result.end(), values);
    }

    // Every rank leaves where its bytes are; rank 0 copies them all, in rank order, before any rank
    // goes on.
    void gather(int rank, const void* mine, std::uint64_t bytes, void* all, std::uint64_t capacity) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            parts_.resize(static_cast<std::size_t>(size_));
            parts_[static_cast<std::size_t>(rank)] = {static_cast<const char*>(mine), bytes};
        }
        wait();
        if (rank == 0) {
            std::uint64_t total = 0;
            for (const auto& part : parts_) {
                total += part.second;
            }
            // A test's ranks that disagree fail loudly rather than write past the room.
            if (total != capacity) {
                std::abort();
            }
            char* to = static_cast<char*>(all);
            for (const auto& [from, length] : parts_) {
                std::copy(from, from + length, to);
                to += length;
            }
        }
        wait();
    }

    void wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        const long generation = generation_;
        if (++arrived_ == size_) {
            arrived_ = 0;
            ++generation_;
            turn_.notify_all();
            return;
        }
        turn_.wait(lock, [&] { return generation_ != generation; });
    }

    int size_;
    std::mutex mutex_;
    std::condition_variable turn_;
    int arrived_ = 0;
    long generation_ = 0;
    std::vector<std::int64_t> signed_;
    std::vector<std::uint64_t> unsigned_;
    std::vector<std::pair<const char*, std::uint64_t>> parts_;
};

}  // namespace vlattice::test

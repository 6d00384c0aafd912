#include "vlattice/collective.hpp"

#include "vlattice/types.hpp"

#include <cstring>
#include <string>

namespace vlattice {

namespace {

class SingleProcess final : public Collective {
public:
    int rank() const override { return 0; }
    int size() const override { return 1; }
    void sum(std::int64_t*, std::size_t) override {}
    void sum(std::uint64_t*, std::size_t) override {}
    void max(std::uint64_t*, std::size_t) override {}
    void gather_to_first(const void* mine, std::uint64_t bytes, void* all, std::uint64_t capacity) override {
        if (bytes != capacity) {
            throw Error("gather_to_first: " + std::to_string(bytes) + " bytes for room of " + std::to_string(capacity));
        }
        if (bytes > 0) {
            std::memcpy(all, mine, bytes);
        }
    }
};

}  // namespace

Collective& single_process() {
    static SingleProcess one;
    return one;
}

}  // namespace vlattice

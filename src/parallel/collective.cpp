#include "vlattice/collective.hpp"

namespace vlattice {

namespace {

class SingleProcess final : public Collective {
public:
    int rank() const override { return 0; }
    int size() const override { return 1; }
    void sum(std::int64_t*, std::size_t) override {}
    void sum(std::uint64_t*, std::size_t) override {}
    void max(std::uint64_t*, std::size_t) override {}
};

}  // namespace

Collective& single_process() {
    static SingleProcess one;
    return one;
}

}  // namespace vlattice

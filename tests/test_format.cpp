// The .vlat writer and reader against docs/format.md: bit packing, exact round trips, byte-identical
// rewrites, and every way a file can be damaged producing an Error that names the file and the spot.
#include "support.hpp"
#include "vlat_bytes.hpp"

#include "vlattice/codec.hpp"
#include "vlattice/format.hpp"
#include "vlattice/half.hpp"
#include "vlattice/io.hpp"
#include "vlattice/pipeline.hpp"
#include "vlattice/residual.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <limits>

using Catch::Contains;
using Catch::StartsWith;
using namespace vlattice;
using namespace vlattice::test;

namespace {

VlatFile sample(std::mt19937_64& rng, std::uint64_t n, std::uint32_t d, std::size_t m,
                AnchorStorage storage = AnchorStorage::f32, bool codes = false) {
    VlatFile file;
    file.n = n;
    file.d = d;
    file.metric = Metric::angular;
    file.anchor_storage = storage;
    file.anchors = random_points(m, d, rng);
    std::uniform_int_distribution<std::uint32_t> anchor(0, static_cast<std::uint32_t>(m - 1));
    file.assignments.resize(n);
    for (std::uint32_t& a : file.assignments) {
        a = anchor(rng);
    }
    file.metadata_json = R"({"tool":"vlattice","energy":0.25,"note":"café — raw UTF-8, \u00e9 escaped"})";
    if (codes) {
        // Every width, in an order that interleaves them, so the layout's grouping is exercised.
        std::vector<std::uint8_t> widths(d);
        for (std::uint32_t k = 0; k < d; ++k) {
            widths[k] = static_cast<std::uint8_t>(kResidualWidths[(k * 3 + 1) % kResidualWidths.size()]);
        }
        add_residual_codes(file, random_points(n, d, rng), widths);
    }
    return file;
}

std::vector<std::uint32_t> random_values(std::mt19937_64& rng, std::size_t count, unsigned bits) {
    std::uniform_int_distribution<std::uint64_t> any(0, std::numeric_limits<std::uint32_t>::max());
    const std::uint64_t mask = (std::uint64_t{1} << bits) - 1;
    std::vector<std::uint32_t> values(count);
    for (std::uint32_t& v : values) {
        v = static_cast<std::uint32_t>(any(rng) & mask);
    }
    return values;
}

// A written sample file and its bytes, for the tests that damage it.
struct Written {
    ScratchDir dir;
    std::string path = dir.path("sample.vlat");
    VlatFile file;
    std::string bytes;
    std::vector<VlatSection> sections;

    explicit Written(std::uint64_t n = 1000, std::uint32_t d = 6, std::size_t m = 257, bool codes = false) {
        std::mt19937_64 rng(seed());
        file = sample(rng, n, d, m, AnchorStorage::f32, codes);
        write_vlat(path, file);
        bytes = read_file(path);
        sections = read_vlat(path).sections;
    }

    // Writes `damaged` as a new file and returns its path.
    std::string put(const std::string& damaged, const std::string& name = "damaged.vlat") const {
        const std::string p = dir.path(name);
        write_file(p, damaged);
        return p;
    }
};

}  // namespace

TEST_CASE("assignment_bits is ceil(log2 m), 0 for a single anchor", "[format]") {
    CHECK(assignment_bits(1) == 0);
    CHECK(assignment_bits(2) == 1);
    CHECK(assignment_bits(3) == 2);
    CHECK(assignment_bits(4) == 2);
    CHECK(assignment_bits(5) == 3);
    CHECK(assignment_bits(255) == 8);
    CHECK(assignment_bits(256) == 8);
    CHECK(assignment_bits(257) == 9);
    CHECK(assignment_bits(65536) == 16);
    CHECK(assignment_bits(65537) == 17);
    CHECK(assignment_bits((std::uint64_t{1} << 31) + 1) == 32);
    CHECK(assignment_bits(std::numeric_limits<std::uint32_t>::max()) == 32);
}

TEST_CASE("pack_bits and unpack_bits round-trip every width", "[format]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    for (unsigned bits = 0; bits <= 32; ++bits) {
        for (const std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1001},
                                        std::size_t{2 * (rng() % 500) + 1}}) {
            INFO("bits " << bits << ", count " << count);
            const std::vector<std::uint32_t> values = random_values(rng, count, bits);
            const std::vector<std::uint8_t> packed = pack_bits(values, bits);
            CHECK(packed.size() == (count * bits + 7) / 8);
            CHECK(unpack_bits(packed, bits, count) == values);
        }
    }
}

TEST_CASE("pack_bits is least significant bit first and keeps only the low bits", "[format]") {
    // 1, 2, 3 at 2 bits: 01 | 10 << 2 | 11 << 4 = 0b00111001.
    CHECK(pack_bits({1, 2, 3}, 2) == std::vector<std::uint8_t>{0x39});
    // 0x1ff at 9 bits spills one bit into the second byte; the high bits of 0xfffffe00 are dropped.
    CHECK(pack_bits({0x1ff, 0xfffffe00}, 9) == std::vector<std::uint8_t>{0xff, 0x01, 0x00});
    CHECK(pack_bits({0xdeadbeef}, 32) == std::vector<std::uint8_t>{0xef, 0xbe, 0xad, 0xde});
    CHECK(pack_bits({5, 6}, 0).empty());
    CHECK(unpack_bits({}, 0, 3) == std::vector<std::uint32_t>{0, 0, 0});
}

TEST_CASE("pack_bits and unpack_bits reject bad widths and short input", "[format]") {
    CHECK_THROWS_AS(pack_bits({1}, 33), Error);
    CHECK_THROWS_AS(unpack_bits({0}, 33, 1), Error);
    CHECK_THROWS_WITH(unpack_bits({0, 0}, 9, 2), Contains("need 3 bytes, got 2"));
}

TEST_CASE("write_vlat then read_vlat returns the same file", "[format]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    ScratchDir dir;
    const std::string path = dir.path("round.vlat");

    SECTION("f32 anchors are exact, sections are listed with their offsets and checksums") {
        const VlatFile file = sample(rng, 1001, 7, 300);
        write_vlat(path, file);
        const VlatFile back = read_vlat(path);
        CHECK(back.n == file.n);
        CHECK(back.d == file.d);
        CHECK(back.metric == Metric::angular);
        CHECK(back.anchor_storage == AnchorStorage::f32);
        CHECK(back.codec == ResidualCodec::none);
        CHECK(back.anchors.rows == 300);
        CHECK(back.anchors.cols == 7);
        CHECK(back.anchors.data == file.anchors.data);
        CHECK(back.assignments == file.assignments);
        CHECK(back.metadata_json == file.metadata_json);

        const std::string bytes = read_file(path);
        CHECK(back.file_bytes == bytes.size());
        CHECK(bytes.substr(0, 8) == "VLATTICE");
        CHECK(value_at<std::uint32_t>(bytes, kVersionOffset) == kVlatVersion);
        CHECK(value_at<std::uint32_t>(bytes, kMOffset) == 300);
        CHECK(static_cast<unsigned>(bytes[kBitsOffset]) == 9);
        CHECK(value_at<std::uint32_t>(bytes, kSectionCountOffset) == 3);

        const std::vector<std::string> tags = {"ANCH", "ASGN", "META"};
        const std::vector<std::uint64_t> lengths = {300 * 7 * 4, (1001 * 9 + 7) / 8, file.metadata_json.size()};
        REQUIRE(back.sections.size() == 3);
        std::uint64_t offset = kHeaderBytes;
        for (std::size_t i = 0; i < 3; ++i) {
            const VlatSection& section = back.sections[i];
            CHECK(section.tag == tags[i]);
            CHECK(bytes.substr(offset, 4) == tags[i]);
            CHECK(section.offset == offset + kSectionHeadBytes);
            CHECK(section.length == lengths[i]);
            CHECK(section.checksum == xxh3(bytes, section.offset, section.length));
            offset = section.offset + section.length + 8;
        }
        CHECK(offset == bytes.size());
    }

    SECTION("f16 anchors are within half precision") {
        const VlatFile file = sample(rng, 500, 16, 64, AnchorStorage::f16);
        write_vlat(path, file);
        const VlatFile back = read_vlat(path);
        CHECK(back.anchor_storage == AnchorStorage::f16);
        CHECK(back.sections[0].length == 64 * 16 * 2);
        REQUIRE(back.anchors.data.size() == file.anchors.data.size());
        for (std::size_t i = 0; i < file.anchors.data.size(); ++i) {
            const float x = file.anchors.data[i];
            CHECK(std::fabs(back.anchors.data[i] - x) <= std::ldexp(std::fabs(x), -11) + 1e-7f);
            CHECK(back.anchors.data[i] == half_to_float(float_to_half(x)));
        }
        CHECK(back.assignments == file.assignments);
    }

    SECTION("a single anchor takes no assignment bits; empty metadata is written as {}") {
        VlatFile file = sample(rng, 9, 3, 1);
        file.metric = Metric::l2;
        file.metadata_json.clear();
        write_vlat(path, file);
        const VlatFile back = read_vlat(path);
        CHECK(back.metric == Metric::l2);
        CHECK(back.sections[1].length == 0);
        CHECK(back.assignments == std::vector<std::uint32_t>(9, 0));
        CHECK(back.metadata_json == "{}");
    }

    SECTION("the ip metric is stored as metric code 2") {
        VlatFile file = sample(rng, 40, 3, 4);
        file.metric = Metric::ip;
        write_vlat(path, file);
        CHECK(static_cast<unsigned>(read_file(path)[kMetricOffset]) == 2);
        CHECK(read_vlat(path).metric == Metric::ip);
    }

    SECTION("m equal to n, and powers of two") {
        for (const std::size_t m : {std::size_t{2}, std::size_t{256}, std::size_t{257}}) {
            VlatFile file = sample(rng, m, 2, m);
            write_vlat(path, file);
            const VlatFile back = read_vlat(path);
            CHECK(back.assignments == file.assignments);
            CHECK(back.anchors.data == file.anchors.data);
        }
    }
}

TEST_CASE("writing the same VlatFile twice gives identical bytes", "[format]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    ScratchDir dir;
    for (const AnchorStorage storage : {AnchorStorage::f32, AnchorStorage::f16}) {
        VlatFile file = sample(rng, 777, 5, 33, storage);
        write_vlat(dir.path("a.vlat"), file);
        file.sections.push_back({"JUNK", 1, 2, 3});  // filled by the reader, ignored by the writer
        file.file_bytes = 12345;
        write_vlat(dir.path("b.vlat"), file);
        CHECK(read_file(dir.path("a.vlat")) == read_file(dir.path("b.vlat")));
    }
}

TEST_CASE("read_vlat rejects files that are missing, empty or not .vlat", "[format]") {
    ScratchDir dir;
    const std::string missing = dir.path("missing.vlat");
    CHECK_THROWS_WITH(read_vlat(missing), StartsWith(missing) && Contains("cannot open"));

    const std::string empty = dir.path("empty.vlat");
    write_file(empty, "");
    CHECK_THROWS_WITH(read_vlat(empty), StartsWith(empty) && Contains("empty"));

    const std::string other = dir.path("vectors.fvecs");
    write_file(other, std::string(100, '\x04'));
    CHECK_THROWS_WITH(read_vlat(other), StartsWith(other) && Contains("not a .vlat file (bad magic)"));

    const std::string short_other = dir.path("short.txt");
    write_file(short_other, "hi");
    CHECK_THROWS_WITH(read_vlat(short_other), Contains("bad magic"));
}

TEST_CASE("read_vlat rejects a damaged header", "[format]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    const Written w;

    SECTION("truncated header") {
        CHECK_THROWS_WITH(read_vlat(w.put(w.bytes.substr(0, 20))),
                          StartsWith(w.dir.path("damaged.vlat")) && Contains("truncated header"));
    }
    SECTION("wrong magic") {
        std::string bytes = w.bytes;
        bytes[3] = 'X';
        CHECK_THROWS_WITH(read_vlat(w.put(bytes)), Contains("not a .vlat file (bad magic)"));
    }
    SECTION("unknown version, checked before the header checksum and the header size") {
        std::string bytes = w.bytes;
        bytes.replace(kVersionOffset, 4, bytes_of(std::uint32_t{7}));
        CHECK_THROWS_WITH(read_vlat(w.put(bytes)),
                          Contains("unsupported .vlat version 7 (this build reads 1 to 4)"));
        CHECK_THROWS_WITH(read_vlat(w.put(bytes.substr(0, 16))), Contains("unsupported .vlat version 7"));
    }
    SECTION("every header byte is covered by the header checksum") {
        for (std::size_t i = kVersionOffset + 4; i < kHeaderBytes; ++i) {
            INFO("byte " << i);
            std::string bytes = w.bytes;
            bytes[i] = static_cast<char>(bytes[i] ^ 0x10);
            CHECK_THROWS_WITH(read_vlat(w.put(bytes)), StartsWith(w.dir.path("damaged.vlat")) &&
                                                           Contains("header checksum mismatch"));
        }
    }
    SECTION("fields with values version 1 does not define") {
        const auto rejects = [&](const std::string& bytes, const std::string& message) {
            INFO(message);
            CHECK_THROWS_WITH(read_vlat(w.put(bytes)), StartsWith(w.dir.path("damaged.vlat")) && Contains(message));
        };
        rejects(with_header_field(w.bytes, kMetricOffset, std::uint8_t{3}), "unknown metric code 3");
        rejects(with_header_field(w.bytes, kStorageOffset, std::uint8_t{2}), "unknown anchor storage code 2");
        rejects(with_header_field(w.bytes, kCodecOffset, std::uint8_t{1}), "residual codec code 1 in a version 1 file");
        rejects(with_header_field(w.bytes, kDOffset, std::uint32_t{0}), "dimension d is 0");
        rejects(with_header_field(w.bytes, kMOffset, std::uint32_t{0}), "anchor count m is 0");
        // n = 0 is a model, whose ASGN section is empty.
        rejects(with_header_field(w.bytes, kNOffset, std::uint64_t{0}),
                "section ASGN has 1125 bytes, the header's n = 0, d = 6, m = 257 need 0");
        rejects(with_header_field(w.bytes, kNOffset, std::uint64_t{100}), "257 anchors for 100 vectors (m > n)");
        rejects(with_header_field(w.bytes, kBitsOffset, std::uint8_t{8}), "8 bits per assignment, but 257 anchors take 9");
        rejects(with_header_field(w.bytes, kMOffset, std::uint32_t{513}), "9 bits per assignment, but 513 anchors take 10");
    }
}

TEST_CASE("read_vlat rejects damaged sections, naming the section", "[format]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    const Written w;
    const std::string damaged = w.dir.path("damaged.vlat");
    REQUIRE(w.sections.size() == 3);

    SECTION("a flipped payload byte is a checksum error naming its section") {
        for (const VlatSection& section : w.sections) {
            for (const std::uint64_t at : {section.offset, section.offset + section.length / 2,
                                           section.offset + section.length - 1}) {
                INFO(section.tag << " byte " << at);
                std::string bytes = w.bytes;
                bytes[at] = static_cast<char>(bytes[at] ^ 0x01);
                CHECK_THROWS_WITH(read_vlat(w.put(bytes)),
                                  StartsWith(damaged) &&
                                      Contains("section " + section.tag + ": checksum mismatch (file damaged)"));
            }
        }
    }
    SECTION("a damaged stored checksum is a checksum error too") {
        std::string bytes = w.bytes;
        const std::size_t at = w.sections[1].offset + w.sections[1].length + 3;
        bytes[at] = static_cast<char>(bytes[at] ^ 0x80);
        CHECK_THROWS_WITH(read_vlat(w.put(bytes)), Contains("section ASGN: checksum mismatch"));
    }
    SECTION("every cut of the file throws an Error, never crashes") {
        for (std::size_t size = 0; size < w.bytes.size(); ++size) {
            INFO("cut at " << size);
            CHECK_THROWS_AS(read_vlat(w.put(w.bytes.substr(0, size))), Error);
        }
        const VlatSection& anchors = w.sections[0];
        const std::size_t cut = anchors.offset + 100;
        CHECK_THROWS_WITH(read_vlat(w.put(w.bytes.substr(0, cut))),
                          StartsWith(damaged) && Contains("section ANCH truncated: needs " +
                                                          std::to_string(anchors.length + 8) + " bytes, file has 100"));
        CHECK_THROWS_WITH(read_vlat(w.put(w.bytes.substr(0, w.sections[2].offset - 5))),
                          Contains("truncated: section 3 of 3 needs 12 header bytes"));
    }
    SECTION("every single-byte change anywhere is detected") {
        for (std::size_t i = 0; i < w.bytes.size(); ++i) {
            INFO("byte " << i);
            std::string bytes = w.bytes;
            bytes[i] = static_cast<char>(~bytes[i]);
            CHECK_THROWS_AS(read_vlat(w.put(bytes)), Error);
        }
    }
    SECTION("a section length far past the end of the file is refused before allocating") {
        std::string bytes = w.bytes;
        bytes.replace(w.sections[1].offset - 8, 8, bytes_of(std::numeric_limits<std::uint64_t>::max()));
        CHECK_THROWS_WITH(read_vlat(w.put(bytes)), Contains("section ASGN truncated: needs 18446744073709551615 + 8"));
    }
    SECTION("trailing bytes after the last section") {
        CHECK_THROWS_WITH(read_vlat(w.put(w.bytes + "garbage")),
                          StartsWith(damaged) && Contains("7 trailing bytes after the last section"));
    }
    SECTION("an unknown section tag is named, and a version 2 tag in a version 1 file is out of place") {
        std::string bytes = w.bytes;
        bytes.replace(w.sections[2].offset - kSectionHeadBytes, 4, "RESI");
        CHECK_THROWS_WITH(read_vlat(w.put(bytes)), StartsWith(damaged) && Contains("section RESI") &&
                                                       Contains("out of place (.vlat version 1 has ANCH, ASGN, META"));
        bytes.replace(w.sections[2].offset - kSectionHeadBytes, 4, std::string("\x01Z\xff ", 4));
        CHECK_THROWS_WITH(read_vlat(w.put(bytes)), Contains("unknown section tag '\\x01Z\\xff '"));
    }
    SECTION("sections out of order or missing") {
        std::string bytes = w.bytes;
        bytes.replace(w.sections[2].offset - kSectionHeadBytes, 4, "ANCH");
        CHECK_THROWS_WITH(read_vlat(w.put(bytes)), Contains("section ANCH at offset") && Contains("out of place"));
        CHECK_THROWS_WITH(read_vlat(w.put(with_header_field(w.bytes, kSectionCountOffset, std::uint32_t{2}))),
                          StartsWith(damaged) && Contains("missing section META"));
        CHECK_THROWS_WITH(read_vlat(w.put(with_header_field(w.bytes, kSectionCountOffset, std::uint32_t{4}))),
                          Contains("section 4 of 4"));
    }
    SECTION("a payload length that does not match the header") {
        const std::string bytes = with_header_field(w.bytes, kNOffset, std::uint64_t{1008});
        CHECK_THROWS_WITH(read_vlat(w.put(bytes)), StartsWith(damaged) && Contains("section ASGN has 1125 bytes") &&
                                                       Contains("need 1134"));
    }
    SECTION("an assignment outside the anchors, with a valid checksum") {
        std::vector<std::uint32_t> assignments = w.file.assignments;
        assignments[12] = 300;
        const std::vector<std::uint8_t> packed = pack_bits(assignments, 9);
        const std::string bytes = with_payload(w.bytes, w.sections[1], std::string(packed.begin(), packed.end()));
        CHECK_THROWS_WITH(read_vlat(w.put(bytes)),
                          StartsWith(damaged) && Contains("assignment of vector 12 is 300, but the file has 257 anchors"));
    }
}

TEST_CASE("write_vlat refuses inconsistent contents and leaves an existing file alone", "[format]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    ScratchDir dir;
    const std::string path = dir.path("out.vlat");
    write_file(path, "precious");
    const VlatFile good = sample(rng, 100, 4, 10);

    const auto refuses = [&](const VlatFile& file, const std::string& message) {
        INFO(message);
        CHECK_THROWS_WITH(write_vlat(path, file), StartsWith(path) && Contains(message));
        CHECK(read_file(path) == "precious");
    };

    VlatFile bad = good;
    bad.assignments[42] = 10;
    refuses(bad, "assignment of vector 42 is 10, but there are 10 anchors");

    bad = good;
    bad.assignments.pop_back();
    refuses(bad, "n is 100 but there are 99 assignments");

    bad = good;
    bad.d = 5;
    refuses(bad, "anchors are 10 x 4");

    bad = good;
    bad.anchors = Matrix(0, 4);
    refuses(bad, "cannot write 0 anchors");

    bad = good;
    bad.n = 5;
    bad.assignments.resize(5);
    refuses(bad, "5 vectors cannot have 10 anchors");

    bad = good;
    bad.anchor_storage = AnchorStorage::f16;
    bad.anchors.row(3)[2] = 1e6f;
    refuses(bad, "anchor 3, component 2");

    const auto entries = std::distance(std::filesystem::directory_iterator(dir.dir()),
                                       std::filesystem::directory_iterator());
    CHECK(entries == 1);  // no temporary file left behind
}

TEST_CASE("write_vlat replaces an existing file as a whole", "[format]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    ScratchDir dir;
    const std::string path = dir.path("out.vlat");
    write_file(path, std::string(100000, 'x'));
    const VlatFile file = sample(rng, 50, 3, 5);
    write_vlat(path, file);
    CHECK(read_vlat(path).assignments == file.assignments);
}

TEST_CASE("residual codes round-trip exactly through a version 2 file", "[format]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    for (const auto storage : {AnchorStorage::f32, AnchorStorage::f16}) {
        for (const std::uint32_t d : {1u, 7u, 33u}) {
            INFO("d " << d << ", f16 " << (storage == AnchorStorage::f16));
            ScratchDir dir;
            const VlatFile file = sample(rng, 500, d, 40, storage, true);
            write_vlat(dir.path("codes.vlat"), file);
            const VlatFile back = read_vlat(dir.path("codes.vlat"));
            CHECK(format_version(back) == 2);
            CHECK(back.codec == ResidualCodec::scalar);
            CHECK(back.sections.size() == 4);
            CHECK(back.sections[2].tag == "RESI");
            CHECK(back.residuals.layout.bits == file.residuals.layout.bits);
            CHECK(back.residuals.layout.byte == file.residuals.layout.byte);
            CHECK(back.residuals.layout.shift == file.residuals.layout.shift);
            CHECK(back.residuals.offset.data == file.residuals.offset.data);
            CHECK(back.residuals.step.data == file.residuals.step.data);
            CHECK(back.residuals.codes == file.residuals.codes);
            CHECK(back.anchors.data == file.anchors.data);
            CHECK(reconstruct(back).data == reconstruct(file).data);
            CHECK(code_bytes_per_vector(back) ==
                  Approx((std::ceil(500.0 * assignment_bits(40) / 8.0) + 500.0 * file.residuals.layout.code_bytes) / 500.0));
        }
    }
}

TEST_CASE("read_vlat rejects a damaged RESI section, naming it", "[format]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    const Written w(300, 5, 17, true);
    REQUIRE(w.sections.size() == 4);
    const VlatSection& resi = w.sections[2];
    REQUIRE(resi.tag == "RESI");
    const std::string damaged = w.dir.path("damaged.vlat");

    SECTION("a flipped code byte is a checksum error") {
        std::string bytes = w.bytes;
        bytes[resi.offset + resi.length - 1] ^= 0x01;
        CHECK_THROWS_WITH(read_vlat(w.put(bytes)), StartsWith(damaged) && Contains("section RESI: checksum mismatch"));
    }
    SECTION("a width that is not 0, 2, 4 or 8 is named with its dimension") {
        std::string payload = w.bytes.substr(resi.offset, resi.length);
        payload[3] = 3;
        CHECK_THROWS_WITH(read_vlat(w.put(with_payload(w.bytes, resi, payload))),
                          StartsWith(damaged) && Contains("residual width of dimension 3 is 3 bits"));
    }
    SECTION("widths that imply another length are a length error") {
        std::string payload = w.bytes.substr(resi.offset, resi.length);
        payload[0] = payload[0] == 8 ? 2 : 8;
        CHECK_THROWS_WITH(read_vlat(w.put(with_payload(w.bytes, resi, payload))),
                          StartsWith(damaged) && Contains("section RESI has"));
    }
    SECTION("a negative step is refused") {
        std::string payload = w.bytes.substr(resi.offset, resi.length);
        const std::size_t step0 = 5 + 17 * 5 * 4;  // after the widths and the offsets
        payload.replace(step0, 4, bytes_of(-1.0f));
        CHECK_THROWS_WITH(read_vlat(w.put(with_payload(w.bytes, resi, payload))),
                          StartsWith(damaged) && Contains("anchor 0, dimension 0") && Contains("step >= 0"));
    }
    SECTION("a version 2 file without its RESI section") {
        std::string bytes = w.bytes.substr(0, resi.offset - 12) + w.bytes.substr(resi.offset + resi.length + 8);
        CHECK_THROWS_WITH(read_vlat(w.put(bytes)), StartsWith(damaged) && Contains("section META") &&
                                                       Contains("out of place"));
    }
    SECTION("a truncated RESI section") {
        CHECK_THROWS_WITH(read_vlat(w.put(w.bytes.substr(0, resi.offset + 10))),
                          StartsWith(damaged) && Contains("section RESI truncated"));
    }
}

TEST_CASE("write_vlat refuses residual codes that do not fit the file", "[format]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    ScratchDir dir;
    const std::string path = dir.path("codes.vlat");
    const VlatFile good = sample(rng, 200, 5, 9, AnchorStorage::f32, true);

    VlatFile no_codes = good;
    no_codes.residuals = ResidualCodes{};
    CHECK_THROWS_WITH(write_vlat(path, no_codes), Contains(path) && Contains("residual codes are missing"));
    VlatFile no_codec = good;
    no_codec.codec = ResidualCodec::none;
    CHECK_THROWS_WITH(write_vlat(path, no_codec), Contains("the residual codec is none, but residual codes are given"));
    VlatFile short_codes = good;
    short_codes.residuals.codes.pop_back();
    CHECK_THROWS_WITH(write_vlat(path, short_codes), Contains(path) && Contains("do not fit n = 200, d = 5, m = 9"));
    VlatFile moved = good;
    moved.residuals.layout.shift[0] ^= 1;
    CHECK_THROWS_WITH(write_vlat(path, moved), Contains("layout is not the one its widths give"));
    CHECK_FALSE(std::filesystem::exists(path));
    write_vlat(path, good);
    CHECK(read_vlat(path).residuals.codes == good.residuals.codes);
}

TEST_CASE("read_vlat refuses anchors that are not finite, naming the section, anchor and dimension", "[format]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    const std::string nan = bytes_of(std::numeric_limits<float>::quiet_NaN());

    SECTION("float32: NaN, and -Inf in a file with residual codes") {
        for (const bool codes : {false, true}) {
            INFO("codes " << codes);
            const Written w(300, 5, 17, codes);
            const VlatSection& anch = w.sections[0];
            REQUIRE(anch.tag == "ANCH");
            std::string payload = w.bytes.substr(anch.offset, anch.length);
            const std::size_t at = (2 * 5 + 3) * sizeof(float);  // anchor 2, dimension 3
            payload.replace(at, sizeof(float), codes ? bytes_of(-std::numeric_limits<float>::infinity()) : nan);
            CHECK_THROWS_WITH(read_vlat(w.put(with_payload(w.bytes, anch, payload))),
                              StartsWith(w.dir.path("damaged.vlat")) &&
                                  Contains(std::string("section ANCH: anchor 2, dimension 3 is ") +
                                           (codes ? "-inf" : "nan")));
        }
    }
    SECTION("float16: Inf and NaN") {
        std::mt19937_64 rng(s);
        ScratchDir dir;
        const std::string path = dir.path("f16.vlat");
        write_vlat(path, sample(rng, 300, 5, 17, AnchorStorage::f16, true));
        const std::string bytes = read_file(path);
        const VlatSection anch = read_vlat(path).sections[0];
        REQUIRE(anch.length == 17 * 5 * 2);
        for (const auto& [half, name] : {std::pair<std::uint16_t, const char*>{0x7c00, "inf"}, {0x7e00, "nan"}}) {
            std::string payload = bytes.substr(anch.offset, anch.length);
            payload.replace((16 * 5 + 4) * 2, 2, bytes_of(half));  // the last anchor's last component
            write_file(dir.path("damaged.vlat"), with_payload(bytes, anch, payload));
            CHECK_THROWS_WITH(read_vlat(dir.path("damaged.vlat")),
                              Contains(std::string("section ANCH: anchor 16, dimension 4 is ") + name));
        }
    }
    SECTION("the writer refuses them too, and leaves no file") {
        std::mt19937_64 rng(s);
        ScratchDir dir;
        VlatFile file = sample(rng, 50, 3, 4);
        file.anchors.row(1)[2] = std::numeric_limits<float>::infinity();
        CHECK_THROWS_WITH(write_vlat(dir.path("out.vlat"), file),
                          Contains("section ANCH: anchor 1, dimension 2 is inf"));
        CHECK_FALSE(std::filesystem::exists(dir.path("out.vlat")));
    }
}

TEST_CASE("read_vlat refuses residual ranges whose decoded values are not finite", "[format]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    constexpr std::uint32_t d = 5;
    constexpr std::size_t m = 17;
    const Written w(300, d, m, true);
    const VlatSection& resi = w.sections[2];
    REQUIRE(resi.tag == "RESI");
    const std::vector<std::uint8_t>& widths = w.file.residuals.layout.bits;
    const auto dimension_of_width = [&](unsigned width) {
        const auto found = std::find(widths.begin(), widths.end(), width);
        REQUIRE(found != widths.end());
        return static_cast<std::size_t>(found - widths.begin());
    };
    // RESI: d widths, then m x d offsets, then m x d steps (docs/format.md).
    const auto offset_at = [&](std::size_t anchor, std::size_t k) { return d + 4 * (anchor * d + k); };
    const auto step_at = [&](std::size_t anchor, std::size_t k) { return d + 4 * m * d + 4 * (anchor * d + k); };
    const auto with_range = [&](std::size_t anchor, std::size_t k, float offset, float step) {
        std::string payload = w.bytes.substr(resi.offset, resi.length);
        payload.replace(offset_at(anchor, k), 4, bytes_of(offset));
        payload.replace(step_at(anchor, k), 4, bytes_of(step));
        return w.put(with_payload(w.bytes, resi, payload));
    };

    SECTION("a step of 3e38 on an 8-bit dimension: code 255 overflows") {
        const std::size_t k = dimension_of_width(8);
        CHECK_THROWS_WITH(read_vlat(with_range(4, k, 0.0f, 3e38f)),
                          StartsWith(w.dir.path("damaged.vlat")) &&
                              Contains("section RESI: anchor 4, dimension " + std::to_string(k)) &&
                              Contains("code 0 to 255") && Contains("decodes to inf"));
    }
    SECTION("a finite offset and a finite step whose sum overflows") {
        const std::size_t k = dimension_of_width(2);
        CHECK_THROWS_WITH(read_vlat(with_range(0, k, 3e38f, 1.5e37f)),
                          Contains("anchor 0, dimension " + std::to_string(k)) && Contains("code 0 to 3") &&
                              Contains("decodes to inf"));
    }
    SECTION("the same ranges are read where every code stays finite") {
        // Width 0 decodes to the offset whatever the step; 1e36 x 255 is below the float32 maximum.
        const VlatFile zero = read_vlat(with_range(4, dimension_of_width(0), 1e38f, 3e38f));
        const VlatFile wide = read_vlat(with_range(4, dimension_of_width(8), 0.0f, 1e36f));
        for (const VlatFile* file : {&zero, &wide}) {
            const Matrix back = reconstruct(*file);
            CHECK(std::all_of(back.data.begin(), back.data.end(), [](float v) { return std::isfinite(v); }));
        }
    }
}

TEST_CASE("version 1 and 2 files written before version 3 still decode to the same values", "[format]") {
    // tests/data: made by `vlattice compress` (then `decompress` for the .decoded.fvecs) before
    // .vlat version 3 existed, from 40 x 6 float32 vectors.
    struct Fixture {
        const char* name;
        std::uint32_t version;
        ResidualCodec codec;
        Metric metric;
        AnchorStorage storage;
        std::size_t m;
    };
    const Fixture fixtures[] = {
        {"v1", 1, ResidualCodec::none, Metric::l2, AnchorStorage::f32, 4},
        {"v2", 2, ResidualCodec::scalar, Metric::l2, AnchorStorage::f32, 4},
        {"v2-f16-angular", 2, ResidualCodec::scalar, Metric::angular, AnchorStorage::f16, 3},
    };
    for (const Fixture& f : fixtures) {
        INFO(f.name);
        const std::string base = std::string(VLATTICE_SOURCE_DIR) + "/tests/data/" + f.name;
        const VlatFile file = read_vlat(base + ".vlat");
        CHECK(format_version(file) == f.version);
        CHECK(value_at<std::uint32_t>(read_file(base + ".vlat"), kVersionOffset) == f.version);
        CHECK(file.codec == f.codec);
        CHECK(file.metric == f.metric);
        CHECK(file.anchor_storage == f.storage);
        CHECK(file.n == 40);
        CHECK(file.d == 6);
        CHECK(file.anchors.rows == f.m);
        CHECK(file.product.empty());
        const Matrix expected = read_vectors(base + ".decoded.fvecs");
        const Matrix decoded = reconstruct(file);
        CHECK(decoded.rows == expected.rows);
        CHECK(decoded.cols == expected.cols);
        CHECK(decoded.data == expected.data);
    }
}

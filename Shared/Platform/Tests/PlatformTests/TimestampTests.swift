@testable import Codecs
import Foundation
import Testing

@Suite("timestamps")
struct TimestampTests {
    @Test("RFC 3339 with an offset, Z, fractions and a space separator")
    func parsesRFC3339() throws {
        let expected = Date(timeIntervalSince1970: 1_770_764_400)  // 2026-02-10T23:00:00Z
        #expect(Timestamp.parseRFC3339("2026-02-11T08:00:00+09:00") == expected)
        #expect(Timestamp.parseRFC3339("2026-02-10T23:00:00Z") == expected)
        #expect(Timestamp.parseRFC3339("2026-02-10 23:00:00z") == expected)
        let fraction = try #require(Timestamp.parseRFC3339("2026-02-10T23:00:00.250-00:30"))
        #expect(abs(fraction.timeIntervalSince(expected) - 1800.25) < 0.000_001)
    }

    @Test("written as bytes, an instant reads as it does made from formatted parts", arguments: 0..<5 as Range<UInt64>)
    func bytesMatchParts(seed: UInt64) throws {
        var random = SeededGenerator(state: seed)
        // Year 0000 to 9999, to the microsecond, and a whole second, a millisecond or a round fraction in a share of
        // them (the fraction's trailing zeros are kept down to three digits).
        let first = -62_167_219_200.0  // 0000-01-01T00:00:00Z
        let last = 253_402_300_799.0  // 9999-12-31T23:59:59Z
        for index in 0..<2000 {
            var seconds = Double(Int64.random(in: Int64(first)...Int64(last), using: &random))
            switch index % 4 {
            case 0: break
            case 1: seconds += Double(Int.random(in: 0..<1000, using: &random)) / 1000
            case 2: seconds += Double(Int.random(in: 0..<100, using: &random)) / 100
            default: seconds += Double(Int.random(in: 0..<1_000_000, using: &random)) / 1_000_000
            }
            let date = Date(timeIntervalSince1970: seconds)
            #expect(Timestamp.rfc3339UTC(date) == Timestamp.textByParts(date), "at \(seconds)")
        }
        #expect(Timestamp.rfc3339UTC(Date(timeIntervalSince1970: first)) == "0000-01-01T00:00:00Z")
        #expect(Timestamp.rfc3339UTC(Date(timeIntervalSince1970: last + 0.5)) == "9999-12-31T23:59:59.500Z")
        #expect(
            Timestamp.rfc3339UTC(Date(timeIntervalSince1970: 1_770_764_400.123456)) == "2026-02-10T23:00:00.123456Z")
    }

    @Test(
        "rejects dates without an offset or out of range",
        arguments: [
            "2026-02-11T08:00:00", "2026-02-30T08:00:00Z", "2026-13-01T00:00:00Z", "2026-02-11T24:00:00Z",
            "2026-02-11", "2026-02-11T08:00Z", "2026-02-11T08:00:00+0900", "2026-02-11T08:00:00.Z", "",
            "2025-02-29T00:00:00Z",
        ])
    func rejects(text: String) {
        #expect(Timestamp.parseRFC3339(text) == nil)
    }

    @Test("PostgreSQL's ISO output with short and long offsets")
    func parsesPostgres() {
        let expected = Date(timeIntervalSince1970: 1_770_764_400.5)
        #expect(Timestamp.parsePostgres("2026-02-11 08:00:00.5+09") == expected)
        #expect(Timestamp.parsePostgres("2026-02-10 23:00:00.5+00") == expected)
        #expect(Timestamp.parsePostgres("2026-02-11 04:30:00.5+05:30") == expected)
    }

    @Test("formats UTC and round-trips microseconds, before 1970 too")
    func formats() {
        #expect(Timestamp.rfc3339UTC(Date(timeIntervalSince1970: 1_770_764_400)) == "2026-02-10T23:00:00Z")
        #expect(
            Timestamp.rfc3339UTC(Date(timeIntervalSince1970: 1_770_764_400.123456)) == "2026-02-10T23:00:00.123456Z")
        #expect(Timestamp.rfc3339UTC(Date(timeIntervalSince1970: -1)) == "1969-12-31T23:59:59Z")
        #expect(Timestamp.rfc3339UTC(Date(timeIntervalSince1970: 951_782_400)) == "2000-02-29T00:00:00Z")
    }
}

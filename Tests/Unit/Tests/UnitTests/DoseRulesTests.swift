import Codecs
import CaregiverPush
import Foundation
import Testing
import TestFixtures

/// The dose rules (docs/behaviour.md#dose-rules) at every boundary.
@Suite("dose rules: Tokyo date, slot, within time")
struct DoseRulesTests {
    static func instant(_ text: String) -> Date { Timestamp.parseRFC3339(text)! }

    @Test(
        "slots by Tokyo wall clock, at each boundary",
        arguments: [
            ("03:59", Slot.bedtime), ("04:00", .morning), ("10:59", .morning), ("11:00", .noon), ("15:59", .noon),
            ("16:00", .evening), ("19:59", .evening), ("20:00", .bedtime), ("23:59", .bedtime), ("00:00", .bedtime),
        ])
    func slots(time: String, slot: Slot) {
        #expect(Slot(instant: Self.instant("2026-02-11T\(time):00+09:00")) == slot)
        #expect(Slot(instant: Self.instant("2026-02-11T\(time):59.999+09:00")) == slot)
    }

    @Test("the Tokyo date changes at Tokyo midnight, which is 15:00 UTC")
    func tokyoMidnight() {
        #expect(TokyoClock.dateString(of: Self.instant("2026-02-11T14:59:59Z")) == "2026-02-11")
        #expect(TokyoClock.dateString(of: Self.instant("2026-02-11T15:00:00Z")) == "2026-02-12")
        #expect(TokyoClock.dateString(of: Self.instant("2026-12-31T15:00:00Z")) == "2027-01-01")
        #expect(TokyoClock.hourMinute(Self.instant("2026-02-11T15:00:59Z")) == "00:00")
        #expect(TokyoClock.dateString(of: Self.instant("2028-02-28T15:30:00Z")) == "2028-02-29")
    }

    @Test("within time is inclusive at exactly +60 minutes")
    func withinTime() {
        let scheduled = Self.instant("2026-02-11T08:00:00+09:00")
        #expect(DoseRules.isWithinTime(scheduledAt: scheduled, takenAt: scheduled.addingTimeInterval(3600)))
        #expect(!DoseRules.isWithinTime(scheduledAt: scheduled, takenAt: scheduled.addingTimeInterval(3600.001)))
        #expect(DoseRules.isWithinTime(scheduledAt: scheduled, takenAt: scheduled.addingTimeInterval(-7200)))
    }

    @Test("a schedule time on a Tokyo date is that wall-clock minute at +09:00")
    func scheduledInstant() throws {
        let date = try #require(LocalDate("2026-02-11"))
        #expect(DoseRules.scheduledInstant(date: date, minuteOfDay: 8 * 60) == Self.instant("2026-02-10T23:00:00Z"))
        #expect(
            DoseRules.scheduledInstant(date: date, minuteOfDay: 2 * 60) == Self.instant("2026-02-11T02:00:00+09:00"))
    }

    @Test("dates are strict YYYY-MM-DD; the future is after today's Tokyo date")
    func dates() throws {
        for bad in ["2026-02-30", "2026-2-11", "2026-02-11T00:00", "２０２６-02-11", "", "2026-13-01"] {
            #expect(LocalDate(bad) == nil)
        }
        let now = Self.instant("2026-02-11T14:59:00Z")  // 23:59 in Tokyo
        #expect(!DoseRules.isFutureDate(try #require(LocalDate("2026-02-11")), now: now))
        #expect(DoseRules.isFutureDate(try #require(LocalDate("2026-02-12")), now: now))
        #expect(DoseRules.isAcceptableTakenAt(now.addingTimeInterval(300), now: now))
        #expect(!DoseRules.isAcceptableTakenAt(now.addingTimeInterval(301), now: now))
    }
}

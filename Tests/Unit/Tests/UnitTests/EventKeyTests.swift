import Codecs
import CaregiverPush
import Foundation
import Testing

/// Which recordings share a push event (docs/behaviour.md#event-key), the Tokyo rules it rests on and the plausible
/// `takenAt`, at chosen instants: each slot boundary, Tokyo midnight (15:00 UTC), UTC midnight, the last minute of a
/// month and of a year. Nothing here reads the wall clock, so the verdict is the same at any hour.
@Suite("event keys and the Tokyo rules at chosen instants")
struct EventKeyTests {
    static let patient = UUID(uuidString: "0F000000-0000-4000-8000-00000000000A")!
    static let record = UUID(uuidString: "0F000000-0000-4000-8000-00000000000B")!

    static func instant(_ text: String) -> Date { Timestamp.parseRFC3339(text)! }

    /// A single scheduled dose's event: date and slot of `scheduledAt`, the key's minute from `takenAt`.
    static func single(scheduledAt: String, takenAt: String, caregiver: UUID? = nil) -> DoseTakenEvent {
        let scheduled = instant(scheduledAt)
        let taken = instant(takenAt)
        return DoseTakenEvent(
            patientID: AppID(patient), date: TokyoClock.dateString(of: scheduled), slot: Slot(instant: scheduled),
            recordingGroupID: nil, takenAt: taken,
            withinTime: DoseRules.isWithinTime(scheduledAt: scheduled, takenAt: taken), actingCaregiverID: caregiver)
    }

    /// (`takenAt`, the Tokyo date, slot and `HH:mm` of it)
    static let instants: [(String, String, Slot, String)] = [
        ("2026-02-11T03:59:59+09:00", "2026-02-11", .bedtime, "03:59"),
        ("2026-02-11T04:00:00+09:00", "2026-02-11", .morning, "04:00"),
        ("2026-02-11T10:59:59+09:00", "2026-02-11", .morning, "10:59"),
        ("2026-02-11T11:00:00+09:00", "2026-02-11", .noon, "11:00"),
        ("2026-02-11T15:59:59+09:00", "2026-02-11", .noon, "15:59"),
        ("2026-02-11T16:00:00+09:00", "2026-02-11", .evening, "16:00"),
        ("2026-02-11T19:59:59+09:00", "2026-02-11", .evening, "19:59"),
        ("2026-02-11T20:00:00+09:00", "2026-02-11", .bedtime, "20:00"),
        ("2026-02-11T14:59:59Z", "2026-02-11", .bedtime, "23:59"),  // Tokyo midnight is 15:00 UTC
        ("2026-02-11T15:00:00Z", "2026-02-12", .bedtime, "00:00"),
        ("2026-02-28T23:59:59Z", "2026-03-01", .morning, "08:59"),  // UTC midnight: already March in Tokyo
        ("2026-03-01T00:00:00Z", "2026-03-01", .morning, "09:00"),
        ("2026-01-31T23:59:30+09:00", "2026-01-31", .bedtime, "23:59"),  // the last minute of a month
        ("2026-02-01T00:00:10+09:00", "2026-02-01", .bedtime, "00:00"),
        ("2025-12-31T23:59:30+09:00", "2025-12-31", .bedtime, "23:59"),  // the last minute of a year
        ("2026-01-01T00:00:10+09:00", "2026-01-01", .bedtime, "00:00"),
        ("2028-02-29T01:27:00+09:00", "2028-02-29", .bedtime, "01:27"),
    ]

    @Test("a PRN dose is an event of its own, keyed by its record, whatever the hour", arguments: instants)
    func prnKey(takenAt: String, date: String, slot: Slot, hhmm: String) {
        let prn = DoseTakenEvent.prn(
            recordID: AppID(Self.record), patientID: AppID(Self.patient), takenAt: Self.instant(takenAt),
            actingCaregiverID: nil)
        #expect(prn.eventKey == "doseTaken:prn:0f000000-0000-4000-8000-00000000000b")
        #expect(prn.date == date && prn.slot == slot && !prn.withinTime && prn.recordingGroupID == nil)
        // A scheduled dose of the PRN's own date and slot, taken in its minute, has another key.
        let scheduled = Self.single(scheduledAt: takenAt, takenAt: takenAt)
        #expect(scheduled.date == prn.date && scheduled.slot == prn.slot)
        #expect(scheduled.eventKey != prn.eventKey && scheduled.collapseID != prn.collapseID)
    }

    @Test(
        "a single dose's key: its scheduled date and slot in Tokyo, the Tokyo minute it was taken", arguments: instants)
    func singleKey(takenAt: String, date: String, slot: Slot, hhmm: String) {
        let event = Self.single(scheduledAt: takenAt, takenAt: takenAt)
        #expect(event.eventKey == "doseTaken:0f000000-0000-4000-8000-00000000000a:\(date):\(slot.rawValue):\(hhmm)")
    }

    @Test("two single doses of one slot taken in one minute share a key; a minute apart, or across midnight, do not")
    func singleDosesMerge() {
        let first = Self.single(scheduledAt: "2026-02-11T08:00:00+09:00", takenAt: "2026-02-11T08:00:10+09:00")
        let second = Self.single(
            scheduledAt: "2026-02-11T04:00:00+09:00", takenAt: "2026-02-11T08:00:50+09:00", caregiver: UUID())
        #expect(first.eventKey == second.eventKey && first.withinTime && !second.withinTime)
        let nextMinute = Self.single(scheduledAt: "2026-02-11T08:00:00+09:00", takenAt: "2026-02-11T08:01:00+09:00")
        #expect(nextMinute.eventKey != first.eventKey)
        // 23:59:30 and 00:00:10 Tokyo: another minute, and another day.
        let before = Self.single(scheduledAt: "2025-12-31T23:30:00+09:00", takenAt: "2025-12-31T23:59:30+09:00")
        let after = Self.single(scheduledAt: "2026-01-01T00:00:00+09:00", takenAt: "2026-01-01T00:00:10+09:00")
        #expect(before.eventKey.hasSuffix(":2025-12-31:bedtime:23:59"))
        #expect(after.eventKey.hasSuffix(":2026-01-01:bedtime:00:00"))
    }

    @Test("a slot recording's key is its group, at any instant")
    func groupKey() {
        let group = UUID(uuidString: "0F000000-0000-4000-8000-00000000000C")!
        for (takenAt, date, slot, _) in Self.instants {
            let event = DoseTakenEvent(
                patientID: AppID(Self.patient), date: date, slot: slot, recordingGroupID: AppID(group),
                takenAt: Self.instant(takenAt), withinTime: true, actingCaregiverID: nil)
            #expect(event.eventKey == "doseTaken:0f000000-0000-4000-8000-00000000000c")
        }
    }

    @Test(
        "today and the plausible takenAt follow the given now across Tokyo midnight, UTC midnight, a month and a year",
        arguments: [
            ("2025-12-31T14:59:59Z", "2025-12-31"), ("2025-12-31T15:00:00Z", "2026-01-01"),
            ("2026-01-31T14:59:30Z", "2026-01-31"), ("2026-01-31T15:00:00Z", "2026-02-01"),
            ("2026-02-28T23:59:59Z", "2026-03-01"), ("2026-02-11T19:00:00Z", "2026-02-12"),
        ])
    func todayAndWindow(now text: String, today: String) throws {
        let now = Self.instant(text)
        let todayDate = try #require(LocalDate(today))
        #expect(LocalDate(tokyoDateOf: now) == todayDate)
        #expect(!DoseRules.isFutureDate(todayDate, now: now))
        let tomorrow = LocalDate(tokyoDateOf: now.addingTimeInterval(86_400))
        #expect(DoseRules.isFutureDate(tomorrow, now: now))
        // Five minutes ahead of now, 31 days back; for a scheduled dose no earlier than 24 hours before it.
        #expect(DoseRules.isAcceptableTakenAt(now.addingTimeInterval(300), now: now))
        #expect(!DoseRules.isAcceptableTakenAt(now.addingTimeInterval(301), now: now))
        #expect(DoseRules.isAcceptableTakenAt(now.addingTimeInterval(-31 * 86_400), now: now))
        #expect(!DoseRules.isAcceptableTakenAt(now.addingTimeInterval(-31 * 86_400 - 1), now: now))
        let scheduled = now.addingTimeInterval(3600)
        #expect(!DoseRules.isAcceptableTakenAt(scheduled.addingTimeInterval(-86_401), now: now, scheduledAt: scheduled))
        #expect(DoseRules.isAcceptableTakenAt(scheduled.addingTimeInterval(-86_400), now: now, scheduledAt: scheduled))
    }
}

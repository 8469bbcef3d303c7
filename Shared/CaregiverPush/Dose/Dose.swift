import Codecs
import FoundationEssentials
import FunctionRuntime
import Libpq
import PushPayloadContract

// The dose: the Tokyo calendar it is scheduled on, the rules a recording is checked by, and the medication it is
// of. Each recording endpoint's answer is declared beside the endpoint.

/// Wall-clock arithmetic in Asia/Tokyo (UTC+09:00, no daylight saving since 1951), done with integers so that it
/// never depends on the machine's time-zone database (docs/behaviour.md#dose-tokyo).
public enum TokyoClock {
    public static let offsetSeconds: Int64 = 9 * 3600

    /// The Tokyo calendar date of an instant, `YYYY-MM-DD`.
    public static func dateString(of instant: Date) -> String {
        let (year, month, day) = Timestamp.civil(fromDays: localSeconds(instant).floorDiv(86_400))
        return Timestamp.dateText(year: year, month: month, day: day)
    }

    /// Minutes since Tokyo midnight, 0 ..< 1440.
    public static func minuteOfDay(_ instant: Date) -> Int {
        Int(localSeconds(instant).floorMod(86_400) / 60)
    }

    /// `HH:mm` of an instant in Tokyo.
    public static func hourMinute(_ instant: Date) -> String {
        Timestamp.hourMinuteText(minuteOfDay: minuteOfDay(instant))
    }

    private static func localSeconds(_ instant: Date) -> Int64 {
        Int64(instant.timeIntervalSince1970.rounded(.down)) + offsetSeconds
    }
}

/// The four parts of a day a dose belongs to, by Tokyo wall-clock time (docs/behaviour.md#dose-slots). Defined once in
/// `PushPayloadContract`, which the caregiver app's `CaregiverPushClient` reads pushes with.
public typealias Slot = PushPayloadContract.Slot

extension Slot {
    /// `morning` 04:00–10:59, `noon` 11:00–15:59, `evening` 16:00–19:59, `bedtime` 20:00–03:59.
    public init(minuteOfDay minute: Int) {
        switch minute {
        case 240..<660: self = .morning
        case 660..<960: self = .noon
        case 960..<1200: self = .evening
        default: self = .bedtime
        }
    }

    /// The slot of an instant in Tokyo.
    public init(instant: Date) {
        self.init(minuteOfDay: TokyoClock.minuteOfDay(instant))
    }
}

/// A calendar date without a time zone (`YYYY-MM-DD`), read strictly.
public struct LocalDate: Sendable, Equatable, Comparable, CustomStringConvertible {
    public let year: Int64
    public let month: Int64
    public let day: Int64

    /// Parses exactly `YYYY-MM-DD` with a real month and day; `nil` otherwise.
    public init?(_ text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard text.utf8.count == 10, parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
            let year = Int64(parts[0]), let month = Int64(parts[1]), let day = Int64(parts[2]),
            (1...12).contains(month), day >= 1, day <= Timestamp.daysIn(month: month, year: year)
        else { return nil }
        self.year = year
        self.month = month
        self.day = day
    }

    /// The Tokyo date of an instant.
    public init(tokyoDateOf instant: Date) {
        // Always valid: TokyoClock renders a real date.
        self = LocalDate(TokyoClock.dateString(of: instant)) ?? LocalDate(unchecked: 1970, 1, 1)
    }

    private init(unchecked year: Int64, _ month: Int64, _ day: Int64) {
        self.year = year
        self.month = month
        self.day = day
    }

    public var text: String {
        Timestamp.dateText(year: year, month: month, day: day)
    }

    public var description: String { text }

    public static func < (lhs: LocalDate, rhs: LocalDate) -> Bool { lhs.text < rhs.text }
}

/// The dose rules (docs/behaviour.md#dose-rules), in one place: Tokyo dates, scheduled instants, "within time", the
/// future bounds.
public enum DoseRules {
    /// A dose taken up to this long after its scheduled time is "within time".
    public static let withinTimeWindow: TimeInterval = 60 * 60
    /// How far in the future a `takenAt` may lie (clock skew between phone and server).
    public static let takenAtFutureTolerance: TimeInterval = 5 * 60

    /// `takenAt <= scheduledAt + 60 minutes`.
    public static func isWithinTime(scheduledAt: Date, takenAt: Date) -> Bool {
        takenAt <= scheduledAt.addingTimeInterval(withinTimeWindow)
    }

    /// How far in the past a `takenAt` may lie: a dose is logged when taken, or caught up on within the month.
    public static let takenAtPastLimit: TimeInterval = 31 * 24 * 60 * 60
    /// How long before its scheduled time a dose may have been taken (an evening dose taken the night before at
    /// the latest).
    public static let takenAtBeforeScheduleLimit: TimeInterval = 24 * 60 * 60

    /// The plausible `takenAt`s: from 31 days before `now` — and, for a scheduled dose, no earlier than 24 hours
    /// before `scheduledAt` — up to five minutes after `now` (clock skew between phone and server). Anything
    /// outside is a 422 naming `takenAt`: a year-1900 `takenAt` is no longer recorded as "within time".
    public static func takenAtWindow(now: Date, scheduledAt: Date?) -> ClosedRange<Date> {
        var earliest = now.addingTimeInterval(-takenAtPastLimit)
        if let scheduledAt { earliest = max(earliest, scheduledAt.addingTimeInterval(-takenAtBeforeScheduleLimit)) }
        let latest = now.addingTimeInterval(takenAtFutureTolerance)
        return min(earliest, latest)...latest
    }

    /// Whether `takenAt` lies in ``takenAtWindow(now:scheduledAt:)``.
    public static func isAcceptableTakenAt(_ takenAt: Date, now: Date, scheduledAt: Date? = nil) -> Bool {
        takenAtWindow(now: now, scheduledAt: scheduledAt).contains(takenAt)
    }

    /// Whether a Tokyo date is after today's Tokyo date (dates compare as `YYYY-MM-DD` strings).
    public static func isFutureDate(_ date: LocalDate, now: Date) -> Bool {
        date.text > TokyoClock.dateString(of: now)
    }

    /// The instant a schedule time falls on for a Tokyo date: `date` + `timeOfDay` at +09:00.
    public static func scheduledInstant(date: LocalDate, minuteOfDay: Int) -> Date {
        let days = Timestamp.daysFromCivil(year: date.year, month: date.month, day: date.day)
        let seconds = days * 86_400 + Int64(minuteOfDay) * 60 - TokyoClock.offsetSeconds
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }
}

/// A recording named a medication the patient does not have; another patient's medication is indistinguishable from
/// none. (A 404: see ErrorProblems.swift.)
struct UnknownMedication: Error {}

/// A patient's medication as far as recording needs it (never its name).
struct Medication {
    let id: AppID
    let isPRN: Bool
    let startDate: LocalDate
    let endDate: LocalDate?
    let isArchived: Bool

    /// Unarchived, and `date` within start…end.
    func isActive(on date: LocalDate) -> Bool {
        !isArchived && startDate <= date && (endDate.map { date <= $0 } ?? true)
    }

    /// The medication's facts a recording call returned in `row` from `column` on (is_prn, start_date, end_date,
    /// archived: `record_dose` and `record_prn`, migration 000022); `nil` when the call read none (not linked, no
    /// such medication).
    static func facts(_ row: PostgresRow, at column: Int, id: AppID) throws -> Medication? {
        guard let isPRN = try row.decode(Bool?.self, at: column) else { return nil }
        guard let startDate = LocalDate(try row.decode(String.self, at: column + 1)) else {
            throw PostgresError(.decoding, serverMessage: "a medication's start date")
        }
        return Medication(
            id: id, isPRN: isPRN, startDate: startDate,
            endDate: try row.decode(String?.self, at: column + 2).flatMap(LocalDate.init),
            isArchived: try row.decode(Bool.self, at: column + 3))
    }

    /// The statement that reads the patient's active, scheduled (non-PRN) medications on `date` with their schedule
    /// times, for ``scheduledDoses(_:)``, ordered by medication and time so that concurrent recorders insert in the
    /// same order.
    static func scheduledDosesQuery(patientID: AppID, on date: LocalDate) -> PostgresQuery {
        "SELECT * FROM caregiver_push.find_scheduled_doses(\(patientID)::text, \(date.text)::date)"
    }

    /// The doses ``scheduledDosesQuery(patientID:on:)`` read, with their schedule times as minutes of the day.
    static func scheduledDoses(_ rows: PostgresRows) throws -> [(medicationID: AppID, minuteOfDay: Int)] {
        try rows.map { row in
            let (id, minute) = try row.decode((AppID, Int).self)
            return (id, minute)
        }
    }
}

// The dose fields: when it was taken, and how much of an as-needed one.

extension FieldValidator {
    /// `takenAt`, defaulting to now, within the plausible window of ``DoseRules/takenAtWindow(now:scheduledAt:)``.
    /// - Parameter scheduledAt: the dose's scheduled instant, when the request names one (it bounds the window).
    ///   Without a `takenAt`, now must lie in the window too: a scheduled dose more than 24 hours ahead is on a date
    ///   after today in Tokyo, and refused as such here (the answer the endpoint's own schedule check gives).
    mutating func takenAt(now: Date, scheduledAt: Date? = nil) -> (date: Date, text: String?) {
        let window = DoseRules.takenAtWindow(now: now, scheduledAt: scheduledAt)
        guard let given = instant("takenAt", required: false) else {
            if scheduledAt != nil, !window.contains(now) {
                reject("scheduledAt", "scheduledAt may not be on a date after today (Asia/Tokyo)")
            }
            return (now, nil)
        }
        guard given.date <= window.upperBound else {
            reject("takenAt", "takenAt may not be more than 5 minutes in the future")
            return (now, given.text)
        }
        guard given.date >= window.lowerBound else {
            reject(
                "takenAt",
                scheduledAt != nil && window.lowerBound > now.addingTimeInterval(-DoseRules.takenAtPastLimit)
                    ? "takenAt may not be more than 24 hours before scheduledAt"
                    : "takenAt may not be more than 31 days in the past")
            return (now, given.text)
        }
        return (given.date, given.text)
    }

    /// `quantity`: an integer 1–10, default 1. `sent` is what the request said, for the idempotency fingerprint.
    mutating func quantity() -> (value: Int, sent: Int?) {
        guard let raw = members["quantity"], raw != .null else { return (1, nil) }
        guard let integer = raw.integerValue, (1...10).contains(integer) else {
            reject("quantity", "quantity must be an integer from 1 to 10")
            return (1, nil)
        }
        return (Int(integer), Int(integer))
    }
}

extension UnknownMedication: ProblemConvertible {
    var problem: Problem { .notFound("No such medication.") }
}

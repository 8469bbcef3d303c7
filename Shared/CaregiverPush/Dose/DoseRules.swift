import Codecs
import FoundationEssentials

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

import Codecs
import FoundationEssentials
import PushPayloadContract

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

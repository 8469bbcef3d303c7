import FoundationEssentials

/// Exact conversions between instants and their text forms, done with integer calendar arithmetic rather than
/// `DateFormatter` (locale- and allocation-free, and the same on every platform).
public enum Timestamp {
    /// `2026-02-11T22:30:00.123456Z`: UTC, microsecond precision, trailing zeros of the fraction kept at 3 digits.
    public static func rfc3339UTC(_ date: Date) -> String {
        let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        let seconds = micros.floorDiv(1_000_000)
        let fraction = micros - seconds * 1_000_000
        let (day, secondOfDay) = (seconds.floorDiv(86_400), seconds.floorMod(86_400))
        let (year, month, dayOfMonth) = civil(fromDays: day)
        guard (0...9999).contains(year) else { return textByParts(date) }
        // Written as bytes: every line a function logs carries one, and building it from formatted parts cost more
        // than the rest of the line.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(27)
        func digits(_ value: Int64, _ width: Int) {
            var divisor: Int64 = 1
            for _ in 1..<width { divisor *= 10 }
            while divisor > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8((value / divisor) % 10))
                divisor /= 10
            }
        }
        digits(year, 4)
        bytes.append(UInt8(ascii: "-"))
        digits(month, 2)
        bytes.append(UInt8(ascii: "-"))
        digits(dayOfMonth, 2)
        bytes.append(UInt8(ascii: "T"))
        digits(secondOfDay / 3600, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(secondOfDay / 60 % 60, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(secondOfDay % 60, 2)
        if fraction != 0 {
            bytes.append(UInt8(ascii: "."))
            digits(fraction, 6)
            var kept = 6
            while kept > 3, bytes.last == UInt8(ascii: "0") {
                bytes.removeLast()
                kept -= 1
            }
        }
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// ``rfc3339UTC(_:)`` made from formatted parts: the years outside 0000–9999, which four digits do not hold.
    static func textByParts(_ date: Date) -> String {
        let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        let seconds = micros.floorDiv(1_000_000)
        let fraction = micros - seconds * 1_000_000
        let (day, secondOfDay) = (seconds.floorDiv(86_400), seconds.floorMod(86_400))
        let (year, month, dayOfMonth) = civil(fromDays: day)
        var text = dateText(year: year, month: month, day: dayOfMonth) + "T"
        text += "\(hourMinuteText(minuteOfDay: secondOfDay / 60)):\(pad(secondOfDay % 60, 2))"
        if fraction != 0 {
            var digits = pad(fraction, 6)
            while digits.count > 3, digits.hasSuffix("0") { digits.removeLast() }
            text += "." + digits
        }
        return text + "Z"
    }

    /// Parses RFC 3339 `date-time` (`T` or space separator, `Z` or a numeric offset, up to 9 fraction digits).
    /// Returns `nil` for anything else, including a missing offset, which would make the instant ambiguous.
    public static func parseRFC3339(_ text: String) -> Date? {
        parse(text, requireSeconds: true, allowShortOffset: false)
    }

    /// Parses PostgreSQL's ISO `timestamptz` output, whose offset may be `+09`, `+05:30` or `+00:19:20`, and its
    /// `timestamp` (without time zone) output, which has none: the data contract (docs/behaviour.md#data-contract)
    /// lets an app's column be a `timestamp` that holds UTC, as Prisma's `DateTime` does.
    public static func parsePostgres(_ text: String) -> Date? {
        parse(text, requireSeconds: true, allowShortOffset: true, missingOffsetIsUTC: true)
    }

    private static func parse(
        _ text: String, requireSeconds: Bool, allowShortOffset: Bool, missingOffsetIsUTC: Bool = false
    ) -> Date? {
        let bytes = Array(text.utf8)
        var index = 0
        func number(_ digits: Int) -> Int64? {
            guard index + digits <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[index..<index + digits] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int64(byte - 0x30)
            }
            index += digits
            return value
        }
        func accept(_ characters: String) -> Bool {
            guard index < bytes.count, characters.utf8.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        guard let year = number(4), accept("-"), let month = number(2), accept("-"), let day = number(2),
            accept("Tt "), let hour = number(2), accept(":"), let minute = number(2), accept(":"),
            let second = number(2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour < 24, minute < 60,
            second < 60
        else { return nil }
        var nanos: Int64 = 0
        if accept(".") {
            var digits = 0
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
                guard digits < 9 else { return nil }
                nanos = nanos * 10 + Int64(bytes[index] - 0x30)
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<9 { nanos *= 10 }
        }
        var offsetSeconds: Int64 = 0
        if accept("Zz") {
            offsetSeconds = 0
        } else if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
            let sign: Int64 = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let offsetHours = number(2), offsetHours < 24 else { return nil }
            var offsetMinutes: Int64 = 0
            var offsetExtraSeconds: Int64 = 0
            if accept(":") {
                guard let value = number(2), value < 60 else { return nil }
                offsetMinutes = value
                if allowShortOffset, accept(":") {
                    guard let extra = number(2), extra < 60 else { return nil }
                    offsetExtraSeconds = extra
                }
            } else if !allowShortOffset {
                return nil
            }
            offsetSeconds = sign * (offsetHours * 3600 + offsetMinutes * 60 + offsetExtraSeconds)
        } else if !missingOffsetIsUTC {
            return nil
        }
        guard index == bytes.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return Date(timeIntervalSince1970: Double(seconds) + Double(nanos) / 1_000_000_000)
    }

    /// `YYYY-MM-DD`: the one rendering of a calendar date (RFC 3339's `full-date`).
    public static func dateText(year: Int64, month: Int64, day: Int64) -> String {
        "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))"
    }

    /// `HH:mm` of a minute of the day, 0 ..< 1440: the one rendering of a wall-clock time to the minute.
    public static func hourMinuteText(minuteOfDay: some BinaryInteger) -> String {
        "\(pad(minuteOfDay / 60, 2)):\(pad(minuteOfDay % 60, 2))"
    }

    private static func pad(_ value: some BinaryInteger, _ width: Int) -> String {
        String(value).leftPadded(to: width)
    }

    public static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    public static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = y.floorDiv(400)
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01 (`civil_from_days`).
    public static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = z.floorDiv(146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

extension Int64 {
    public func floorDiv(_ divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }

    public func floorMod(_ divisor: Int64) -> Int64 { self - floorDiv(divisor) * divisor }
}

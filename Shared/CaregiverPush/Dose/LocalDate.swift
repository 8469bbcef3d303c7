import Codecs
import FoundationEssentials

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

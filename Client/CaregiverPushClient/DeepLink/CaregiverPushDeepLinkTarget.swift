import Foundation

/// Where a tapped notification leads: one patient's History, at one Tokyo date and slot.
///
/// Replaces the app's `NotificationDeepLinkTarget` for pushes; it adds ``patientID`` (the push payload's `patientId`), so that a caregiver
/// of two patients lands on the right patient's History.
public struct CaregiverPushDeepLinkTarget: Hashable, Sendable {
    /// The patient the dose belongs to; `nil` for the app's local reminders and for a push without `patientId` (an
    /// older server), which open the History of the patient already selected.
    public let patientID: String?
    /// The dose's Tokyo date, `YYYY-MM-DD`; always a real calendar date.
    public let dateKey: String
    public let slot: Slot

    /// - Returns: `nil` unless `dateKey` is a valid `YYYY-MM-DD` calendar date.
    public init?(patientID: String? = nil, dateKey: String, slot: Slot) {
        guard Self.isValidDateKey(dateKey) else { return nil }
        self.patientID = patientID
        self.dateKey = dateKey
        self.slot = slot
    }

    /// `YYYY-MM-DD` with ASCII digits, month 01–12 and a day that exists in that month (leap years included).
    ///
    /// Integer arithmetic, not `DateFormatter`: a formatter is lenient in ways that differ between platforms and
    /// locales, and the server writes exactly this shape.
    public static func isValidDateKey(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-") else { return false }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10) else { return false }
        guard year >= 1, (1...12).contains(month) else { return false }
        let isLeap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, isLeap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        return (1...days).contains(day)
    }
}

/// What the app does with a target, in order: select the patient (when another one is showing), then open History
/// at the date and scroll to the slot with its highlight.
public struct CaregiverPushNavigation: Hashable, Sendable {
    /// The patient to select first; `nil` when the right one is already selected (or the target names none).
    public let selectPatient: String?
    public let dateKey: String
    public let slot: Slot

    public init(selectPatient: String?, dateKey: String, slot: Slot) {
        self.selectPatient = selectPatient
        self.dateKey = dateKey
        self.slot = slot
    }
}

/// The four parts of a day a dose belongs to (docs/behaviour.md#dose-slots), by Tokyo wall-clock time.
///
/// The one definition both sides use: the server puts `rawValue` into the push's `data.slot`, and the app's deep-link
/// router reads it back with `Slot(rawValue:)`. Which minutes fall into which slot is the server's rule and lives
/// with it (`Slot(minuteOfDay:)` in the `CaregiverPush` module).
public enum Slot: String, Sendable, Hashable, CaseIterable, Codable {
    case morning, noon, evening, bedtime
}

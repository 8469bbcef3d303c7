/// Who recorded the doses a push is about (`data.recordedBy`, docs/behaviour.md#payload): the patient, a caregiver
/// for them, or both (two single doses of one slot in one minute, recorded by different people).
public enum DoseRecorder: String, Sendable, CaseIterable {
    case patient, caregiver, both
}

/// The words of the push sent after a TAKEN dose, in every language the app ships (docs/behaviour.md#language).
///
/// The one catalogue both sides use: the server words each device's notification from it in the language the device
/// registered, and the kit's string catalog (`Localizable.xcstrings`) must hold the same text under the same keys,
/// so that the app's in-app banner and the notification say the same thing.
public enum DoseTakenText {
    /// The language a device gets when the catalogue lacks its own: the app's first language.
    public static let fallbackLanguage = "ja"

    /// The catalogue's keys (the kit's string catalog uses the same).
    public enum Key: String, Sendable, CaseIterable {
        case title = "push.doseTaken.title"
        case body = "push.doseTaken.body"
        case bodyWithinTime = "push.doseTaken.body.withinTime"
        case bodyByCaregiver = "push.doseTaken.body.byCaregiver"
        case bodyWithinTimeByCaregiver = "push.doseTaken.body.withinTime.byCaregiver"
    }

    /// language → key → text; `%@` is the patient's display name.
    public static let catalogue: [String: [Key: String]] = [
        "ja": [
            .title: "服薬記録",
            .body: "%@さんが薬を服用しました",
            .bodyWithinTime: "%@さんが時間内に薬を服用しました！",
            .bodyByCaregiver: "%@さんの服薬を介護者が記録しました",
            .bodyWithinTimeByCaregiver: "%@さんの時間内の服薬を介護者が記録しました",
        ],
        "en": [
            .title: "Medication Record",
            .body: "%@ took their medication",
            .bodyWithinTime: "%@ took their medication on time!",
            .bodyByCaregiver: "A caregiver recorded %@'s medication as taken",
            .bodyWithinTimeByCaregiver: "A caregiver recorded %@'s medication as taken on time",
        ],
    ]

    /// The languages the catalogue has.
    public static var languages: [String] { catalogue.keys.sorted() }

    /// The body's key: "on time" only when every dose the push is about was (`withinTime`); "a caregiver recorded"
    /// only when a caregiver recorded every one of them.
    public static func bodyKey(withinTime: Bool, recorder: DoseRecorder) -> Key {
        switch (withinTime, recorder) {
        case (true, .caregiver): .bodyWithinTimeByCaregiver
        case (false, .caregiver): .bodyByCaregiver
        case (true, _): .bodyWithinTime
        case (false, _): .body
        }
    }

    /// The text of `key` in `language` (the fallback language's when the catalogue lacks it), with `%@` replaced by
    /// `displayName`.
    public static func text(_ key: Key, language: String, displayName: String = "") -> String {
        let table = catalogue[language] ?? catalogue[fallbackLanguage] ?? [:]
        let template = table[key] ?? key.rawValue
        guard let marker = template.utf8.indices.first(where: { template.utf8[$0...].starts(with: "%@".utf8) }) else {
            return template
        }
        let after = template.utf8.index(marker, offsetBy: 2)
        return String(template[..<marker]) + displayName + String(template[after...])
    }
}

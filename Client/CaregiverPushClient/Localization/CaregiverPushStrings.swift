import Foundation

/// The kit's strings in one language, from its string catalog (`Resources/Localizable.xcstrings`).
///
/// The catalog is a SwiftPM resource (`.process`). Xcode compiles it into `ja.lproj` and `en.lproj`; SwiftPM on Linux
/// copies the catalog as it is. So a look-up reads the catalog's JSON when the bundle holds it, and the compiled
/// `.lproj` otherwise: the same keys and text either way, and the Linux tests read exactly the file Xcode compiles.
public struct CaregiverPushStrings: Sendable {
    /// The languages of the catalog; Japanese is its source language.
    public static let languages = ["ja", "en"]

    public let language: String
    private let table: [String: String]

    /// - Parameter language: `ja` or `en`; anything else is Japanese.
    public init(language: String) {
        let chosen = Self.languages.contains(language) ? language : "ja"
        self.language = chosen
        self.table = Self.catalog?[chosen] ?? Self.compiledTable(language: chosen)
    }

    /// The kit's text in the language the app's own text is in, so that the two never differ: a Japanese-only app
    /// shows Japanese on an English-first phone.
    ///
    /// The app's language is the first of the phone's preferred languages the app is localized in, else the app's
    /// development language (as iOS picks it, by language code). The kit uses it when the catalog has it; otherwise
    /// the first preferred language that both the app and the catalog have; otherwise Japanese.
    /// - Parameters:
    ///   - appLocalizations: the languages the app ships (`Bundle.main.localizations`; `Base` is ignored).
    ///   - developmentLocalization: the app's development language (``appDevelopmentLocalization``).
    ///   - preferredLanguages: the phone's languages, most preferred first (`Locale.preferredLanguages`).
    public static func preferred(
        appLocalizations: [String] = Bundle.main.localizations,
        developmentLocalization: String? = appDevelopmentLocalization,
        preferredLanguages: [String] = Locale.preferredLanguages
    ) -> CaregiverPushStrings {
        func code(_ language: String) -> String {
            String(language.prefix { $0 != "-" && $0 != "_" }).lowercased()
        }
        let app = Set(appLocalizations.map(code).filter { $0 != "base" })
        let preferred = preferredLanguages.map(code)
        let appLanguage = preferred.first { app.contains($0) } ?? developmentLocalization.map(code)
        if let appLanguage, languages.contains(appLanguage) { return CaregiverPushStrings(language: appLanguage) }
        let shared = preferred.first { app.contains($0) && languages.contains($0) }
        return CaregiverPushStrings(language: shared ?? "ja")
    }

    /// `Bundle.main.developmentLocalization` where Foundation has it (Apple's platforms; on Linux it traps).
    public static var appDevelopmentLocalization: String? {
        #if canImport(Darwin)
            Bundle.main.developmentLocalization
        #else
            nil
        #endif
    }

    /// The text for `key`, with `%@` / `%1$@`, `%2$@`… replaced by `arguments` in order. A key the catalog lacks
    /// yields the key itself (the test over the catalog makes that impossible in a build that passed).
    public func callAsFunction(_ key: CaregiverPushStringKey, _ arguments: String...) -> String {
        Self.format(table[key.rawValue] ?? key.rawValue, arguments)
    }

    /// The notification body the server sends for a TAKEN dose, as the catalog words it (the key by
    /// `DoseTakenText.bodyKey`: "on time" only when every dose was, "a caregiver recorded" only when one recorded all).
    public func doseTakenBody(displayName: String, withinTime: Bool, recorder: DoseRecorder = .patient) -> String {
        let key: CaregiverPushStringKey =
            switch DoseTakenText.bodyKey(withinTime: withinTime, recorder: recorder) {
            case .title: .pushTitle
            case .body: .pushBody
            case .bodyWithinTime: .pushBodyWithinTime
            case .bodyByCaregiver: .pushBodyByCaregiver
            case .bodyWithinTimeByCaregiver: .pushBodyWithinTimeByCaregiver
            }
        return self(key, displayName)
    }

    static func format(_ template: String, _ arguments: [String]) -> String {
        var text = template
        for (index, argument) in arguments.enumerated() {
            text = text.replacingOccurrences(of: "%\(index + 1)$@", with: argument)
        }
        for argument in arguments {
            guard let range = text.range(of: "%@") else { break }
            text.replaceSubrange(range, with: argument)
        }
        return text
    }

    /// language → key → text, from the catalog's JSON in the bundle; `nil` where the bundle holds only the compiled
    /// tables (Xcode).
    static let catalog: [String: [String: String]]? = {
        guard let url = Bundle.module.url(forResource: "Localizable", withExtension: "xcstrings"),
            let data = try? Data(contentsOf: url)
        else { return nil }
        return try? parseCatalog(data)
    }()

    /// Reads a string catalog: `strings.<key>.localizations.<language>.stringUnit.value`.
    public static func parseCatalog(_ data: Data) throws -> [String: [String: String]] {
        struct Catalog: Decodable {
            struct Entry: Decodable { let localizations: [String: Localization]? }
            struct Localization: Decodable { let stringUnit: StringUnit? }
            struct StringUnit: Decodable { let value: String }
            let sourceLanguage: String
            let strings: [String: Entry]
        }
        let catalog = try JSONDecoder().decode(Catalog.self, from: data)
        var tables: [String: [String: String]] = [:]
        for (key, entry) in catalog.strings {
            for (language, localization) in entry.localizations ?? [:] {
                if let value = localization.stringUnit?.value { tables[language, default: [:]][key] = value }
            }
        }
        return tables
    }

    private static func compiledTable(language: String) -> [String: String] {
        guard let path = Bundle.module.path(forResource: language, ofType: "lproj"), let bundle = Bundle(path: path)
        else { return [:] }
        var table: [String: String] = [:]
        for key in CaregiverPushStringKey.allCases {
            let value = bundle.localizedString(forKey: key.rawValue, value: nil, table: "Localizable")
            if value != key.rawValue { table[key.rawValue] = value }
        }
        return table
    }
}

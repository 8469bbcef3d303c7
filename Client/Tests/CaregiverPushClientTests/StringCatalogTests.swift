import CaregiverPushClient
import Foundation
import Testing

/// Localized and accessible: every user-facing string of the flow comes from the catalog, in Japanese and English, and the
/// catalog holds nothing the kit does not use.
@Suite("kit: the string catalog")
struct StringCatalogTests {
    /// Client/CaregiverPushClient, from this file's place (Client/Tests/CaregiverPushClientTests/).
    static let kitSources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("CaregiverPushClient")
    static let catalogFile = kitSources.appendingPathComponent("Resources/Localizable.xcstrings")

    static func catalog() throws -> [String: [String: String]] {
        try CaregiverPushStrings.parseCatalog(Data(contentsOf: catalogFile))
    }

    @Test("every key has a non-empty Japanese and English text, and the catalog holds no key the kit lacks")
    func keysInBothLanguages() throws {
        let tables = try Self.catalog()
        let keys = Set(CaregiverPushStringKey.allCases.map(\.rawValue))
        for language in CaregiverPushStrings.languages {
            let table = try #require(tables[language], "no \(language) in the catalog")
            for key in keys { #expect(table[key]?.isEmpty == false, "\(key) has no \(language) text") }
            #expect(Set(table.keys) == keys, "\(language): \(Set(table.keys).symmetricDifference(keys).sorted())")
        }
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: Self.catalogFile)) as? [String: Any])
        #expect(json["sourceLanguage"] as? String == "ja")
    }

    @Test("every key is used by the kit's code, outside the list of keys")
    func everyKeyUsed() throws {
        var code = ""
        let files = try #require(FileManager.default.enumerator(atPath: Self.kitSources.path))
        for case let file as String in files
        where file.hasSuffix(".swift") && !file.hasSuffix("CaregiverPushStringKey.swift") {
            // Code only: a key named in a comment is not used.
            let text = try String(contentsOf: Self.kitSources.appendingPathComponent(file), encoding: .utf8)
            code += text.split(separator: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//") }
                .joined(separator: "\n")
        }
        for key in CaregiverPushStringKey.allCases {
            // `.name` as an enum case (`strings(.name)`, `case .x: .name`), not a property (`text.name`).
            let name = String(describing: key)
            #expect(
                code.range(of: "(?<![A-Za-z0-9_])\\.\(name)\\b", options: .regularExpression) != nil,
                "\(name) (\(key.rawValue)) unused")
        }
    }

    @Test("the placeholders of each key are the same in both languages")
    func placeholdersAgree() throws {
        let tables = try Self.catalog()
        func placeholders(_ text: String) -> [String] {
            let regex = try? NSRegularExpression(pattern: "%([0-9]+\\$)?@")
            let range = NSRange(text.startIndex..., in: text)
            return (regex?.matches(in: text, range: range) ?? []).compactMap {
                Range($0.range, in: text).map { String(text[$0]) }
            }
            .sorted()
        }
        for key in CaregiverPushStringKey.allCases {
            #expect(placeholders(tables["ja"]?[key.rawValue] ?? "") == placeholders(tables["en"]?[key.rawValue] ?? ""))
        }
    }

    @Test("the kit reads the catalog from its resource bundle: the seeds' Japanese, and English")
    func readsBundle() {
        let ja = CaregiverPushStrings(language: "ja")
        #expect(ja(.sectionTitle) == "見守りPush通知" && ja(.overlayTitle) == "更新中")
        #expect(ja(.errorPermissionDenied).contains("設定"))
        let en = CaregiverPushStrings(language: "en")
        #expect(en(.sectionTitle) == "Caregiver Push Notifications" && en(.overlayTitle) == "Updating")
        #expect(en.doseTakenBody(displayName: "Hanako", withinTime: true) == "Hanako took their medication on time!")
        #expect(ja(.bannerLabel, "A", "B") == "通知、A、B")
    }

    @Test("the push's words are the contract's (DoseTakenText), key for key, in every language both have")
    func pushTextIsTheContracts() {
        #expect(Set(DoseTakenText.languages) == Set(CaregiverPushStrings.languages))
        for language in DoseTakenText.languages {
            let strings = CaregiverPushStrings(language: language)
            for key in DoseTakenText.Key.allCases {
                let kitKey = CaregiverPushStringKey(rawValue: key.rawValue)
                #expect(kitKey != nil, "the kit lacks \(key.rawValue)")
                if let kitKey {
                    #expect(strings(kitKey, "Ann") == DoseTakenText.text(key, language: language, displayName: "Ann"))
                }
            }
            for recorder in DoseRecorder.allCases {
                for withinTime in [false, true] {
                    #expect(
                        strings.doseTakenBody(displayName: "Ann", withinTime: withinTime, recorder: recorder)
                            == DoseTakenText.text(
                                DoseTakenText.bodyKey(withinTime: withinTime, recorder: recorder), language: language,
                                displayName: "Ann"))
                }
            }
        }
    }

    @Test("the language the app's own text is in, not merely the phone's: a Japanese-only app stays Japanese")
    func followsTheApp() {
        func language(_ app: [String], _ development: String?, _ phone: [String]) -> String {
            CaregiverPushStrings.preferred(
                appLocalizations: app, developmentLocalization: development, preferredLanguages: phone
            ).language
        }
        // A Japanese-only app on an English-first phone shows Japanese, so the kit does too.
        #expect(language(["ja"], "ja", ["en-US", "ja-JP"]) == "ja")
        #expect(language(["Base", "ja"], "ja", ["en-GB"]) == "ja")
        // A bilingual app follows the phone.
        #expect(language(["en", "ja"], "ja", ["en-US", "ja-JP"]) == "en")
        #expect(language(["ja", "en"], "ja", ["fr-FR", "ja_JP"]) == "ja")
        // A language the app lacks: the app's development language.
        #expect(language(["en", "ja"], "ja", ["fr-FR", "de"]) == "ja")
        #expect(language(["en", "ja"], "en", ["fr-FR"]) == "en")
        // The app in a language the catalog lacks: the phone's next language the app and catalog share, else ja.
        #expect(language(["en", "fr"], "en", ["fr-FR", "en-US"]) == "en")
        #expect(language(["fr"], "fr", ["fr-FR"]) == "ja")
        #expect(CaregiverPushStrings(language: "xx").language == "ja")
    }

    @Test("each error state has its own sentence and button; each off reason its own sentence")
    func errorStatesWorded() {
        let states: [CaregiverPushErrorState] = [
            .permissionDenied, .retry, .signInRequired, .reportBug(problemType: nil), .tokenUnavailable,
        ]
        let ja = CaregiverPushStrings(language: "ja")
        #expect(Set(states.map { ja($0.messageKey) }).count == states.count)
        #expect(states.map(\.action) == [.openSystemSettings, .retry, .signIn, .reportBug, .retry])
        #expect(ja(CaregiverPushErrorState.permissionDenied.actionKey) == "設定を開く")
        #expect(ja(CaregiverPushErrorState.retry.actionKey) == "再試行")
        let reasons = CaregiverPushOffReason.allCases
        #expect(Set(reasons.map { ja($0.messageKey) }).count == reasons.count)
    }
}

/// The settings screen's words, labels and hints, as the view reads them.
@Suite("kit: settings text and accessibility")
struct SettingsTextTests {
    @Test("the Settings tab, the error alert's title and its close button, in both languages")
    func tabAndAlert() {
        let ja = CaregiverPushSettingsText(strings: CaregiverPushStrings(language: "ja"))
        #expect(ja.settingsTabTitle == "設定" && ja.dismissTitle == "閉じる")
        #expect(ja.errorAlertTitle == "Push通知を変更できませんでした")
        let en = CaregiverPushSettingsText(strings: CaregiverPushStrings(language: "en"))
        #expect(en.settingsTabTitle == "Settings" && en.dismissTitle == "Close")
        #expect(en.errorAlertTitle == "Couldn't Change Push Notifications")
        #expect(Set([ja.dismissTitle, ja.actionTitle(for: .retry), ja.actionTitle(for: .permissionDenied)]).count == 3)
    }

    @Test("section title, toggle label/hint/value, overlay text and VoiceOver label, in both languages")
    func words() {
        let ja = CaregiverPushSettingsText(strings: CaregiverPushStrings(language: "ja"))
        #expect(ja.sectionTitle == "見守りPush通知" && ja.overlayTitle == "更新中")
        #expect(ja.toggleLabel == "Push通知を有効にする" && !ja.toggleHint.isEmpty)
        #expect(ja.toggleValue(isOn: true) != ja.toggleValue(isOn: false))
        #expect(ja.overlayAccessibilityLabel.contains("更新") && !ja.permissionExplanation.isEmpty)
        let en = CaregiverPushSettingsText(strings: CaregiverPushStrings(language: "en"))
        #expect(en.toggleValue(isOn: true) == "Push notifications are on" && en.overlayTitle == "Updating")
        #expect(en.message(for: .signInRequired) == "Your sign-in has expired. Please sign in again.")
        #expect(en.actionTitle(for: .reportBug(problemType: "/problems/validation")) == "Report a Problem")
        #expect(en.message(for: .permissionRevoked).contains("Settings app"))
        #expect(en.message(for: CaregiverPushSignOutOutcome.unregistered) == nil)
        #expect(en.message(for: CaregiverPushSignOutOutcome.forgottenLocally(.retry))?.contains("Signed out") == true)
    }
}

/// The settings screen's words in one language, with the VoiceOver labels and hints of the toggle and the overlay:
/// the view reads every user-facing string of the push flow from here (ja and en, VoiceOver labels and hints).
///
/// ```swift
/// Section(text.sectionTitle) {
///     Toggle(text.toggleLabel, isOn: binding)
///         .accessibilityHint(text.toggleHint)
///         .accessibilityValue(text.toggleValue(isOn: settings.isPushEnabled))
/// }
/// ```
public struct CaregiverPushSettingsText: Sendable {
    public let strings: CaregiverPushStrings

    public init(strings: CaregiverPushStrings = .preferred()) {
        self.strings = strings
    }

    /// 設定, the caregiver's Settings tab that holds the section.
    public var settingsTabTitle: String { strings(.settingsTab) }
    /// 見守りPush通知.
    public var sectionTitle: String { strings(.sectionTitle) }
    public var toggleLabel: String { strings(.toggleLabel) }
    /// The toggle's VoiceOver hint: what turning it on does.
    public var toggleHint: String { strings(.toggleHint) }
    /// The toggle's VoiceOver value.
    public func toggleValue(isOn: Bool) -> String { strings(isOn ? .stateOn : .stateOff) }
    /// Shown under the toggle before the system prompt (why the app asks).
    public var permissionExplanation: String { strings(.permissionExplanation) }
    /// 更新中, the overlay's visible text.
    public var overlayTitle: String { strings(.overlayTitle) }
    /// The overlay's VoiceOver label (it takes the focus while shown).
    public var overlayAccessibilityLabel: String { strings(.overlayLabel) }

    /// The title of the alert that shows a failure (``CaregiverPushSettingsModel/errorState``).
    public var errorAlertTitle: String { strings(.errorAlertTitle) }
    /// The alert's second button, which only closes it.
    public var dismissTitle: String { strings(.actionDismiss) }
    /// The sentence for a failure.
    public func message(for state: CaregiverPushErrorState) -> String { strings(state.messageKey) }
    /// The title of the failure's one button.
    public func actionTitle(for state: CaregiverPushErrorState) -> String { strings(state.actionKey) }
    /// Why push is OFF without the caregiver turning it off.
    public func message(for reason: CaregiverPushOffReason) -> String { strings(reason.messageKey) }

    /// What to tell the caregiver after sign-out: only when the server could not be told.
    public func message(for outcome: CaregiverPushSignOutOutcome) -> String? {
        guard case .forgottenLocally = outcome else { return nil }
        return strings(.signOutUnregisterFailed)
    }
}

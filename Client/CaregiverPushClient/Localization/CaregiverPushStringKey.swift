/// Every user-facing string of the push flow: the keys of `Resources/Localizable.xcstrings` (Japanese, the source
/// language, and English). A test fails when a key is missing in either language, when the catalog holds a key that
/// is not here, or when a key here is used nowhere in the kit.
public enum CaregiverPushStringKey: String, Sendable, CaseIterable {
    // The caregiver's Settings tab that holds the section.
    case settingsTab = "caregiver.tabs.settings"
    // The settings section: its title, the toggle, its states and the permission's explanation.
    case sectionTitle = "caregiver.settings.push.section.title"
    case toggleLabel = "caregiver.settings.push.toggle"
    case toggleHint = "caregiver.settings.push.toggle.hint"
    case stateOn = "caregiver.settings.push.enabled"
    case stateOff = "caregiver.settings.push.disabled"
    case permissionExplanation = "caregiver.settings.push.permission.explanation"
    // The "更新中" overlay that blocks the screen while a change is in flight.
    case overlayTitle = "caregiver.settings.push.overlay.title"
    case overlayLabel = "caregiver.settings.push.overlay.accessibility.label"
    // The error alert: its title, the error state's sentence and action, and a button that only closes it.
    case errorAlertTitle = "caregiver.settings.push.error.title"
    case actionDismiss = "caregiver.settings.push.action.dismiss"
    // The error states and what each offers.
    case errorPermissionDenied = "caregiver.settings.push.permission.denied"
    case errorNetwork = "caregiver.settings.push.error.network"
    case errorSignIn = "caregiver.settings.push.error.signIn"
    case errorBug = "caregiver.settings.push.error.bug"
    case errorTokenUnavailable = "caregiver.settings.push.error.token"
    case actionOpenSettings = "caregiver.settings.push.action.openSettings"
    case actionRetry = "caregiver.settings.push.action.retry"
    case actionSignIn = "caregiver.settings.push.action.signIn"
    case actionReportBug = "caregiver.settings.push.action.reportBug"
    // Why push is OFF without the caregiver turning it off (found by the re-check on launch and on return to the
    // foreground).
    case offPermissionRevoked = "caregiver.settings.push.off.permissionRevoked"
    case offServerDisabled = "caregiver.settings.push.off.serverDisabled"
    case offOtherAccount = "caregiver.settings.push.off.otherAccount"
    // Sign-out when the server could not be told.
    case signOutUnregisterFailed = "caregiver.settings.push.signOut.unregisterFailed"
    // The in-app banner for a push arriving in the foreground.
    case bannerLabel = "caregiver.push.banner.accessibility.label"
    case bannerHint = "caregiver.push.banner.accessibility.hint"
    // The server's notification text: PushPayloadContract's DoseTakenText, held equal to it by a test.
    case pushTitle = "push.doseTaken.title"
    case pushBody = "push.doseTaken.body"
    case pushBodyWithinTime = "push.doseTaken.body.withinTime"
    case pushBodyByCaregiver = "push.doseTaken.body.byCaregiver"
    case pushBodyWithinTimeByCaregiver = "push.doseTaken.body.withinTime.byCaregiver"
}

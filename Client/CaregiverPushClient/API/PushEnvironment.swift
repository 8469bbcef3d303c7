/// Which FCM/APNs environment a device token belongs to; the server only pushes to devices registered for its own.
///
/// The app chooses: `DEV` for debug builds (the APNs sandbox), `PROD` for release builds —
/// `#if DEBUG .dev #else .prod #endif` at the place it builds ``PushTokenLifecycle``.
public enum PushEnvironment: String, Sendable, Hashable, CaseIterable, Codable {
    case dev = "DEV"
    case prod = "PROD"
}

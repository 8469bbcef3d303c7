import Foundation

/// The source checkout the tests run from (found from this file's path), for the tests that read its files.
public enum Repository {
    /// The checkout's root (`Tests/TestFixtures/Repository.swift` three levels up).
    public static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}
